"""Sphinx configuration of the hotswitch docs: Markdown (MyST) pages, the tutorials rendered from
their stored outputs by myst-nb (never executed at build time), and the generated reference
pages (``_ext/hotswitch_reference.py``). Built with warnings as errors by the test command
(``tests/test_docs.py``)::

    sphinx-build -W -b html docs docs/_build/html
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "hotswitch"
author = "the hotswitch authors"
copyright = "2026, the hotswitch authors"
extensions = ["myst_nb", "hotswitch_reference"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
nb_execution_mode = "off"  # the tutorials show the outputs they were saved with
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
html_theme = "furo"
html_title = "hotswitch"
suppress_warnings = ["myst.header"]  # pages moved from the README keep their bullet-led sections
