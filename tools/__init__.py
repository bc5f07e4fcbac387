"""The domains that plug into the runtime's tool contract (`agent.tools`)."""
