"""P4Runtime control plane of natswitch: topology model, addressing plan and switch programming."""
