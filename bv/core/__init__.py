"""The lowest layer: record schemas, the JSONL reader and writer, answer extraction and rules,
prompt templates, images, errors and the secrets to redact. Imports nothing else of bv."""
