"""``python -m wepush.cli``: the ``wepush`` console script without its installed entry point."""

from __future__ import annotations

from wepush.cli.main import main

raise SystemExit(main())
