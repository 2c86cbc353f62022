import sys

from ci.localjob.cli import main

sys.exit(main())
