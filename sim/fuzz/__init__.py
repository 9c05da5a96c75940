"""`python -m sim fuzz`: bad inputs against the running service, with corrupt cluster state planted around it.

- `run`: the command; `gen`: seeded bad requests (`jsonpath`: the place in a body it breaks); `raw`: whole
  requests as bytes (broken framing);
- `plant`: corrupt nodes and pods planted in the emulator; `hostile`: valid-looking bodies that name pods the
  caller has no business with; `judge`: what counts as a finding, and the tally.

Imports: sim.chaos's forger (the hostile verbs reuse it) and everything below; never sim.scenarios.
"""
