// SPDX-License-Identifier: GPL-2.0
/*
 * aimd_bpf: a researcher's own congestion control, the worked example of docs/runner.md ("BPF
 * congestion controls"). Plain AIMD in a few lines: slow start to ssthresh, then one packet more
 * per window acknowledged, and half the window on loss. Written here rather than called through
 * kfuncs, to show the shape of an algorithm of one's own: copy this file, rename the struct_ops
 * map and its .name (at most 15 characters), add it to ccsweep.bpfcc.PROGRAMS, run `make bpf`.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

#define TCP_CONG_NON_RESTRICTED 0x1

/* The verifier reads a congestion control's `struct sock *` as the tcp_sock it is. */
static struct tcp_sock *tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

SEC("struct_ops")
void BPF_PROG(aimd_bpf_cong_avoid, struct sock *sk, u32 ack, u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (tp->snd_cwnd < tp->snd_ssthresh) {
		/* slow start: one packet more per packet acknowledged, up to ssthresh */
		u32 grown = tp->snd_cwnd + acked;

		tp->snd_cwnd = grown < tp->snd_ssthresh ? grown : tp->snd_ssthresh;
		return;
	}
	/* additive increase: one packet more per window acknowledged */
	tp->snd_cwnd_cnt += acked;
	if (tp->snd_cwnd_cnt >= tp->snd_cwnd) {
		tp->snd_cwnd_cnt -= tp->snd_cwnd;
		if (tp->snd_cwnd < tp->snd_cwnd_clamp)
			tp->snd_cwnd++;
	}
}

SEC("struct_ops")
u32 BPF_PROG(aimd_bpf_ssthresh, struct sock *sk)
{
	/* multiplicative decrease: half the window, at least two packets */
	u32 half = tcp_sk(sk)->snd_cwnd >> 1;

	return half > 2 ? half : 2;
}

SEC("struct_ops")
u32 BPF_PROG(aimd_bpf_undo_cwnd, struct sock *sk)
{
	/* a loss found spurious: back to the window before it */
	struct tcp_sock *tp = tcp_sk(sk);

	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops aimd_bpf = {
	.flags = TCP_CONG_NON_RESTRICTED,
	.cong_avoid = (void *)aimd_bpf_cong_avoid,
	.ssthresh = (void *)aimd_bpf_ssthresh,
	.undo_cwnd = (void *)aimd_bpf_undo_cwnd,
	.name = "aimd_bpf",
};
