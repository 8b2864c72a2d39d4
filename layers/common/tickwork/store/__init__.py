"""All SQL lives in this package: one module per table family. Functions take a psycopg connection."""
