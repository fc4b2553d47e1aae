"""What the benchmark scripts share, none of it a script: the promised keys each checks its JSON
against (``promised``), the presets and batches of the peer comparisons (``peer_presets``), the
sides those time and how (``peer_sides``), where a GPU step's device waited (``idle``), and the
median time of one operation (``timing``)."""
