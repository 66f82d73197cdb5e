"""Commands and queries. Each command is one writer transaction; handlers call one method."""
