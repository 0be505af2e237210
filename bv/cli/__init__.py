"""The command line: click commands that parse options into each stage's config and wire files,
streams, signals and exit statuses. The top layer, beside bv.api."""
