//! Rule files (YAML, or TOML for `.toml`): parsing and validation into rules.
