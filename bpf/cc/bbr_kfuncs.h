/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel's own BBR (net/ipv4/tcp_bbr.c) as a BPF struct_ops congestion control, through the
 * kfuncs tcp_bbr.c exports. Included by bbr_bpf.bpf.c (paced, as the kernel runs it: the control)
 * and bbr_unpaced.bpf.c (BBR_UNPACED: no pacing), so both run the same code and differ only there.
 *
 * Why a BPF program can make BBR unpaced: bbr_init asks TCP for internal pacing by setting
 * sk->sk_pacing_status to SK_PACING_NEEDED (when no fq qdisc has claimed the socket). Setting it
 * back to SK_PACING_NONE after bbr_init leaves the pacing rate BBR computes unused, so only the
 * cwnd (cwnd_gain 2) bounds what is in flight: BBR as it ran before Linux 4.13 without fq.
 * bbr_init is the only place BBR sets the status, and init runs again whenever TCP reinitialises
 * the congestion control (tcp_reinit_congestion_control), so resetting it there covers every path.
 */
#ifndef CCSWEEP_BBR_KFUNCS_H
#define CCSWEEP_BBR_KFUNCS_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* include/net/tcp.h: any process may pick the algorithm, as it may pick the kernel's bbr. */
#define TCP_CONG_NON_RESTRICTED 0x1

extern void bbr_init(struct sock *sk) __ksym;
extern void bbr_main(struct sock *sk, u32 ack, int flag, const struct rate_sample *rs) __ksym;
extern u32 bbr_sndbuf_expand(struct sock *sk) __ksym;
extern u32 bbr_undo_cwnd(struct sock *sk) __ksym;
extern void bbr_cwnd_event(struct sock *sk, enum tcp_ca_event event) __ksym;
extern u32 bbr_ssthresh(struct sock *sk) __ksym;
extern u32 bbr_min_tso_segs(struct sock *sk) __ksym;
extern void bbr_set_state(struct sock *sk, u8 new_state) __ksym;

/* Define the struct_ops programs and map of one BBR variant named NAME (a C identifier, and the
 * algorithm's name as sockets pick it). UNPACED: 1 to turn TCP's internal pacing off after init. */
#define CCSWEEP_BBR(NAME, UNPACED)                                                              \
SEC("struct_ops")                                                                               \
void BPF_PROG(NAME##_init, struct sock *sk)                                                     \
{                                                                                               \
	bbr_init(sk);                                                                           \
	if (UNPACED)                                                                            \
		sk->sk_pacing_status = SK_PACING_NONE;                                          \
}                                                                                               \
                                                                                                \
SEC("struct_ops")                                                                               \
void BPF_PROG(NAME##_cong_control, struct sock *sk, u32 ack, int flag,                         \
	      const struct rate_sample *rs)                                                     \
{                                                                                               \
	bbr_main(sk, ack, flag, rs);                                                            \
}                                                                                               \
                                                                                                \
SEC("struct_ops")                                                                               \
u32 BPF_PROG(NAME##_sndbuf_expand, struct sock *sk)                                             \
{                                                                                               \
	return bbr_sndbuf_expand(sk);                                                           \
}                                                                                               \
                                                                                                \
SEC("struct_ops")                                                                               \
u32 BPF_PROG(NAME##_undo_cwnd, struct sock *sk)                                                 \
{                                                                                               \
	return bbr_undo_cwnd(sk);                                                               \
}                                                                                               \
                                                                                                \
SEC("struct_ops")                                                                               \
void BPF_PROG(NAME##_cwnd_event, struct sock *sk, enum tcp_ca_event event)                      \
{                                                                                               \
	bbr_cwnd_event(sk, event);                                                              \
}                                                                                               \
                                                                                                \
SEC("struct_ops")                                                                               \
u32 BPF_PROG(NAME##_ssthresh, struct sock *sk)                                                  \
{                                                                                               \
	return bbr_ssthresh(sk);                                                                \
}                                                                                               \
                                                                                                \
SEC("struct_ops")                                                                               \
u32 BPF_PROG(NAME##_min_tso_segs, struct sock *sk)                                              \
{                                                                                               \
	return bbr_min_tso_segs(sk);                                                            \
}                                                                                               \
                                                                                                \
SEC("struct_ops")                                                                               \
void BPF_PROG(NAME##_set_state, struct sock *sk, u8 new_state)                                  \
{                                                                                               \
	bbr_set_state(sk, new_state);                                                           \
}                                                                                               \
                                                                                                \
SEC(".struct_ops")                                                                              \
struct tcp_congestion_ops NAME = {                                                              \
	.flags = TCP_CONG_NON_RESTRICTED,                                                       \
	.init = (void *)NAME##_init,                                                            \
	.cong_control = (void *)NAME##_cong_control,                                            \
	.sndbuf_expand = (void *)NAME##_sndbuf_expand,                                          \
	.undo_cwnd = (void *)NAME##_undo_cwnd,                                                  \
	.cwnd_event = (void *)NAME##_cwnd_event,                                                \
	.ssthresh = (void *)NAME##_ssthresh,                                                    \
	.min_tso_segs = (void *)NAME##_min_tso_segs,                                            \
	.set_state = (void *)NAME##_set_state,                                                  \
	.name = #NAME,                                                                          \
};

#endif
