"""What the tests share that is not a test: loopback servers (fakes), a pty and a headless browser
driver, paths, and helpers. Imported as `support.<module>` (tests/ is on sys.path: tests/conftest.py)."""
