"""Data sets: the official set's sources and its checked writer, `bv import` of the official files,
and `bv synth`. Imports only bv.core."""
