"""What a ``%%train`` cell becomes: the magics, the cell's options checked, where its output
goes, the values it pushes to the ranks."""
