"""The RES array ns_process and ns_rx fill and program.NativeProgram reads."""

MAX_FAST_REPLICAS = 64  # larger groups go through the Python orchestration
# RES: outputs, drops, too big, next free byte of OUT, the assert that failed (its event
# number, 0 for none), then (port, offset, length) of each output
RES_HEAD = 5
