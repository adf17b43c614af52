// SPDX-License-Identifier: GPL-2.0
/* bbr_bpf: the kernel's BBR through its kfuncs, paced as the kernel paces it. The control for
 * bbr_unpaced: the same code on the same BPF path, so a difference between the two is pacing's. */
#include "bbr_kfuncs.h"

char _license[] SEC("license") = "GPL";

CCSWEEP_BBR(bbr_bpf, 0)
