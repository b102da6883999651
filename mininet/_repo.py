"""Imported first by mininet/run.py: this checkout's packages come before any installed copy.

This folder must stay a plain script folder, never a package named `mininet`: the
emulator's own `mininet` package is imported by that name.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
