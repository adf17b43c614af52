// SPDX-License-Identifier: GPL-2.0
/* bbr_unpaced: the kernel's BBR through its kfuncs with TCP's internal pacing turned off, as BBR
 * ran on Linux before 4.13 without the fq qdisc (bbr_kfuncs.h says how). */
#include "bbr_kfuncs.h"

char _license[] SEC("license") = "GPL";

CCSWEEP_BBR(bbr_unpaced, 1)
