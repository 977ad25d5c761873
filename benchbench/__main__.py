import sys

from benchbench.cli import main

sys.exit(main())
