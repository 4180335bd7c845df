"""JPEG folders: make an ImageNet-like one, check a user's, and where the default one lives. Imports core only."""
