"""``python -m localpager.cli``: the ``localpager`` command."""

from . import main

main()
