"""bv's prompt texts, packaged as ``bv.prompts`` (see setup.cfg); every prompt lives here as a .md file."""
