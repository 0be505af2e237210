"""Reading judged rows into figures: the tally, the report, its renderings (table, CSV, Markdown,
HTML) and the official export. Imports only bv.core."""
