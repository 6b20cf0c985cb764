import sys

from locust_llm.sim.command import main

sys.exit(main())
