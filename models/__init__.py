"""The model manifest (manifest.toml), installed as ``localpager.manifest``; see README.md here."""
