"""Networks the compiled program runs in for tests and benches: in-process softswitch
switches (network, fabric), switch processes behind veths in a namespace (netns), and both
targets side by side with their outputs, counters and registers compared (diff)."""
