import sys

from locust_llm.sim.cli import main

sys.exit(main())
