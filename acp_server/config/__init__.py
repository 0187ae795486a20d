"""The configuration file: reading and validating it, its keys table, showing it."""
