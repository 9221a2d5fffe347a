import sys

from zenith.bench.cli import main

sys.exit(main())
