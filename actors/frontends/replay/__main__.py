import sys

from actors.frontends.replay import main

sys.exit(main())
