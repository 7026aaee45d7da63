"""Plugin discovery, the catalogue of what is installed, and building plugins by name."""
