import sys

from .rank import main

sys.exit(main())
