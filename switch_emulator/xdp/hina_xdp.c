// SPDX-License-Identifier: Apache-2.0
/* hina's switch as an eBPF/XDP program: the rules of p4/hina.p4 and switch_emulator/dataplane.py, on
 * every frame a switch port receives, in the driver, before any socket.
 *
 * The controls keep the P4 program's names: the parser, job_config, worker_auth, slot_of,
 * arrival_bitmap with the value_processor inside it, from_parent (trees), mac_forward, and the egress
 * rewrite, which runs once per copy of a frame in the devmap egress program.  Every constant, offset
 * and struct comes from hina_xdp.h, which hina.emulator.xdp.layout generates from hina.wire.headers.
 *
 * Concurrency.  A slot's frames arrive on several CPUs at once (a veth's frames are processed on the
 * CPU of their sender).  Each slot's two copies and their words sit behind one bpf_spin_lock, held
 * from the first read of the copy's state to the last word written, so the rules run on a slot as
 * if one frame at a time, as in the emulator and in a P4 pipeline; slots on different CPUs never
 * wait for each other.  One lock per slot and not per copy, since an arrival in one copy clears the
 * sender's bit in the other.  Counters are per CPU (no atomics on the fast path), summed by the
 * control plane.  docs/switch.md says why a lock and not atomics or steering, and what each costs.
 *
 * Replication.  A RESULT leaves as one frame: bpf_redirect_map with BPF_F_BROADCAST on the job's
 * group (a devmap holding one entry per replica: a port, as often as members have addresses
 * behind it), and the kernel clones it per entry.  The copies are identical, so the devmap egress
 * program addresses each one: the ingress program numbers each broadcast on its CPU (`seq`, in the
 * frame's XDP metadata), the copies for one port reach that port's egress program one after the
 * other on the same CPU, and the egress program counts them against a per-CPU cursor to pick the
 * port's first, second, ... replica.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "hina_xdp.h"

#define NO_SOURCE 0xffffffffffffffffULL /* a source no member has */
#define ETH_P_IPV4 0x0800
#define IPV4_NO_OPTIONS 0x45
#define IPPROTO_UDP_ 17

/* The tables, written by the control plane (hina.emulator.xdp.tables). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);   /* ifindex */
	__type(value, __u32); /* switch port */
} ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, MAX_PORTS);
	__uint(key_size, sizeof(__u32)); /* switch port: a frame to one port */
	__uint(value_size, sizeof(struct bpf_devmap_val));
} egress SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, MAX_PORTS);
	__uint(key_size, sizeof(__u32)); /* the host ports a broadcast floods */
	__uint(value_size, sizeof(struct bpf_devmap_val));
} flood SEC(".maps");

struct group {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, GROUP_ENTRIES);
	__uint(key_size, sizeof(__u32)); /* replica number */
	__uint(value_size, sizeof(struct bpf_devmap_val));
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, MAX_JOBS);
	__type(key, __u32); /* job_id */
	__array(values, struct group);
} groups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_JOBS);
	__type(key, __u32); /* job_id */
	__type(value, struct hina_job);
} jobs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* the switch's slot space: set when the program is loaded */
	__type(key, __u32);     /* the slot (pool index without the copy bit) */
	__type(value, struct hina_slot);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_JOBS);
	__type(key, __u32); /* a job's row */
	__type(value, struct hina_job_counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hina_totals);
} totals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32); /* egress port */
	__type(value, struct hina_rewrite);
} rewrite SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hina_zeros); /* never written: the words of a PENDING answer after its first */
} zeros SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_JOBS * GROUP_ENTRIES);
	__type(key, struct hina_replica_key);
	__type(value, struct hina_replica);
} replicas SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32); /* egress port */
	__type(value, struct hina_cursor);
} cursors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4 * MAX_PORTS);
	__type(key, struct hina_mac_key);
	__type(value, struct hina_mac_action);
} macs SEC(".maps");

/* What arrival_bitmap and from_parent decide (p4/configuration.p4's verdicts, and the drops). */
enum verdict {
	CONSUMED = 1, COMPLETE, RESEND, STALE_RUN_VERDICT, SEND_UP, RESEND_UP, TOTAL, STALE_DOWN, PENDING,
	PENDING_BACK, PENDING_DOWN,
	DROPPED = 0x100, /* | the drop reason */
};

static __always_inline __u32 be16(const __u8 *p)
{
	return bpf_ntohs(*(const __u16 *)p);
}

static __always_inline __u32 be32(const __u8 *p)
{
	return bpf_ntohl(*(const __u32 *)p);
}

static __always_inline __u16 ipv4_checksum(const __u8 *ip)
{
	__u32 sum = 0;
#pragma unroll
	for (int i = 0; i < 20; i += 2)
		if (i != 10)
			sum += be16(ip + i);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

static __always_inline void count_drop(struct hina_totals *t, struct hina_job_counters *jc, __u32 reason)
{
	if (reason < DROP_REASONS) {
		t->drops[reason]++;
		if (jc)
			jc->drops[reason]++;
	}
}

/* The metadata before the frame (MetaKind); NULL where the driver keeps none. */
static __always_inline struct hina_meta *meta_of(struct xdp_md *ctx)
{
	struct hina_meta *m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return NULL;
	return m;
}

static __always_inline void tell(struct hina_meta *m, __u8 kind, __u32 port, __u32 job_id)
{
	m->kind = kind;
	m->port = port;
	m->job_id = job_id;
}

/* A frame out of one port (its devmap entry carries the egress program); no entry: counted unsent. */
static __always_inline int to_port(struct hina_totals *t, __u32 port)
{
	long action = bpf_redirect_map(&egress, port, XDP_DROP);
	if (action != XDP_REDIRECT)
		t->unsent++;
	return action;
}

static __always_inline __u32 fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

/* complete_checksum: a TCP or UDP segment in IPv4 (no options, not a fragment) that mac_forward sends on, its
 * transport checksum completed where it is partial.  A host's stack leaves the checksum partial, the
 * pseudo-header's sum, for a device that offloads it (a veth does) and marks the frame so; a redirect drops
 * the mark, and the host that receives the frame drops it as corrupt.  A device completes what the mark names;
 * here a field that holds the pseudo-header's sum is taken for partial (a complete checksum that happens to
 * equal it is rewritten to the same value: the one over the segment).  Sums run on 16-bit words as loaded,
 * which a ones' complement sum allows in either byte order.  The segment is read into the stack a chunk at a
 * time (bpf_xdp_load_bytes: an offset, not a packet pointer, so the verifier walks each chunk once), the
 * last chunk zero-padded to whole words.  A global function, so that the verifier walks it once and not once
 * per path that reaches it (it takes the context: a global function takes no packet pointer); 1 where it
 * completed a checksum. */
#define IPPROTO_TCP_ 6
#define CSUM_CHUNK 256 /* bytes read into the stack at a time */
#define CSUM_CHUNKS 16 /* a segment of up to 4,096 bytes, more than a page-sized frame holds */
__attribute__((noinline)) int complete_checksum(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *eth = data, *ip = eth + ETH_BYTES, *l4 = eth + IP_END;
	if ((void *)l4 > end || be16(eth + 12) != ETH_P_IPV4 || ip[0] != IPV4_NO_OPTIONS || (be16(ip + 6) & 0x3fff))
		return 0;
	__u32 at = ip[9] == IPPROTO_TCP_ ? 16 : ip[9] == IPPROTO_UDP_ ? 6 : 0; /* the checksum's offset */
	__u32 length = be16(ip + 2);
	if (!at || length < 20 + at + 2 || length > 20 + CSUM_CHUNK * CSUM_CHUNKS || IP_END + length - 20 > end - data)
		return 0;
	length -= 20; /* the segment's */
	__u16 *check = (__u16 *)(l4 + at);
	if ((void *)(check + 1) > end)
		return 0;
	__u16 given = *check;
	__u64 pseudo = (__u64)*(__u16 *)(ip + 12) + *(__u16 *)(ip + 14) + *(__u16 *)(ip + 16) + *(__u16 *)(ip + 18) +
		       bpf_htons(ip[9]) + bpf_htons(length);
	if (given != fold(pseudo))
		return 0; /* complete already (or wrong: left for the receiver to find) */
	__u8 chunk[CSUM_CHUNK];
	__s64 sum = 0;
	__u32 done = 0;
	for (int i = 0; i < CSUM_CHUNKS && length - done >= CSUM_CHUNK; i++) {
		if (bpf_xdp_load_bytes(ctx, IP_END + done, chunk, CSUM_CHUNK) < 0)
			return 0;
		sum = bpf_csum_diff(NULL, 0, (__be32 *)chunk, CSUM_CHUNK, sum);
		if (sum < 0)
			return 0;
		done += CSUM_CHUNK;
	}
	__u32 rest = length - done;
	if (rest >= CSUM_CHUNK)
		return 0;
	if (rest) {
		__builtin_memset(chunk, 0, sizeof(chunk));
		if (bpf_xdp_load_bytes(ctx, IP_END + done, chunk, rest) < 0)
			return 0;
		__u32 words = (rest + 3) & ~3U; /* the zeros after it pad it to whole words */
		if (words > CSUM_CHUNK)
			return 0;
		sum = bpf_csum_diff(NULL, 0, (__be32 *)chunk, words, sum);
		if (sum < 0)
			return 0;
	}
	__u16 out = ~fold((__u64)sum + pseudo + (__u16)~given); /* the segment's words less the field as it came */
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	check = (__u16 *)(data + IP_END + at);
	if ((void *)(check + 1) > end)
		return 0;
	*check = out == 0 && at == 6 ? 0xffff : out; /* UDP's 0 says "no checksum" */
	return 1;
}

/* mac_forward: a frame that is not hina, out of its destination MAC's port, or flooded, with its transport
 * checksum completed (`complete_checksum`). */
static __always_inline int mac_forward(struct xdp_md *ctx, struct hina_totals *t, struct hina_meta *m)
{
	struct hina_mac_key key = {};
	complete_checksum(ctx);
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + ETH_BYTES > end) {
		count_drop(t, NULL, DROP_TRUNCATED);
		return XDP_DROP;
	}
	__builtin_memcpy(key.mac, data, 6);
	struct hina_mac_action *action = bpf_map_lookup_elem(&macs, &key);
	if (!action) {
		count_drop(t, NULL, DROP_NO_ROUTE);
		return XDP_DROP;
	}
	t->forwarded++;
	if (action->flood) {
		tell(m, META_FLOOD, 0, 0);
		return bpf_redirect_map(&flood, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
	}
	tell(m, META_FORWARD, action->port, 0);
	return to_port(t, action->port);
}

/* value_processor, under the slot's lock: the frame's K words written into the copy (first arrival)
 * or combined with it (ADD modulo 2^32, OR, signed MAX); where the arrival completes the copy, the
 * copy's words written back into the frame as they are combined (the RESULT, or the partial up), and
 * otherwise not (the frame is absorbed: its words are read once and dropped with it).
 * One loop per operator, each without a branch inside but its end: the verifier walks every iteration
 * of a loop, and a branch inside would multiply the paths it walks past its limit.  Four words a step,
 * behind one check of the frame's end and of K, then at most three one at a time: a check per word
 * cost as much as the word's own work (benchmarks/xdp_bench.py, 8 workers' UPDATEs of 865 words: 950 ns
 * an absorbed frame, 1,050 a completing one, with a check per word and every frame written back; 580
 * and 870 now). */
#define WORD_LOOP(name, body)                                                                            \
	static __always_inline void name(__u32 *stored, __u8 *words, void *end, __u32 n)                   \
	{                                                                                                    \
		if (n > MAX_WORDS)                                                                           \
			return;                                                                              \
		void *stop = words + 4 * (n & ~3U); /* K's steps of four end here */                        \
		__u32 i = 0;                                                                                 \
		for (; i + 4 <= MAX_WORDS; i += 4) {                                                         \
			__u32 *p = (__u32 *)(words + 4 * i);                                                 \
			if ((void *)(p + 4) > stop || (void *)(p + 4) > end)                                 \
				break;                                                                       \
			body(p, i);                                                                          \
			body(p + 1, i + 1);                                                                  \
			body(p + 2, i + 2);                                                                  \
			body(p + 3, i + 3);                                                                  \
		}                                                                                            \
		/* the last n % 4 words, from where the steps end: the frame holds all n (job_config checked its \
		 * length), so that is n rounded down to 4, worked out again so that the verifier walks the words \
		 * after the steps once and not once for each step the loop may have ended at */                \
		for (__u32 k = n & ~3U, j = 0; j < 3; j++, k++) {                                           \
			if (k >= n || k >= MAX_WORDS)                                                        \
				break;                                                                       \
			__u32 at = k;                                                                        \
			asm volatile("" : "+r"(at)); /* the checked k: not 4 n again, which it cannot bound */   \
			__u32 *p = (__u32 *)(words + 4 * at);                                                \
			if ((void *)(p + 1) > end)                                                           \
				break;                                                                       \
			body(p, k);                                                                          \
		}                                                                                            \
	}
#define MAX_OF(a, b) ((__s32)(a) > (__s32)(b) ? (a) : (b))
#define WRITE(p, k) (stored[k] = bpf_ntohl(*(p)))
#define ABSORB_ADD(p, k) (stored[k] += bpf_ntohl(*(p)))
#define ABSORB_OR(p, k) (stored[k] |= bpf_ntohl(*(p)))
#define ABSORB_MAX(p, k) (stored[k] = MAX_OF(bpf_ntohl(*(p)), stored[k]))
#define COMBINE_ADD(p, k) (*(p) = bpf_htonl(stored[k] += bpf_ntohl(*(p))))
#define COMBINE_OR(p, k) (*(p) = bpf_htonl(stored[k] |= bpf_ntohl(*(p))))
#define COMBINE_MAX(p, k) (*(p) = bpf_htonl(stored[k] = MAX_OF(bpf_ntohl(*(p)), stored[k])))
#define COPY_OUT(p, k) (*(p) = bpf_htonl(stored[k]))
WORD_LOOP(write_words, WRITE)
WORD_LOOP(absorb_add, ABSORB_ADD)
WORD_LOOP(absorb_or, ABSORB_OR)
WORD_LOOP(absorb_max, ABSORB_MAX)
WORD_LOOP(combine_add, COMBINE_ADD)
WORD_LOOP(combine_or, COMBINE_OR)
WORD_LOOP(combine_max, COMBINE_MAX)
/* the copy's words into the frame: a RESULT sent again, a partial sent up again */
WORD_LOOP(copy_out, COPY_OUT)

/* A PENDING answer's words: the copy's arrival bitmap (who is counted) as word 0, written by the rules under
 * the slot's lock, and the rest zeros, written after it by one helper call from `zeros`: a loop over up to
 * MAX_WORDS words would be walked once more by the verifier on every path that reaches it. */
static __always_inline void pending_bitmap(__u8 *words, void *end, __u32 bitmap)
{
	if ((void *)(words + 4) <= end)
		*(__u32 *)words = bpf_htonl(bitmap);
}

static __always_inline void pending_zeros(struct xdp_md *ctx, __u32 n)
{
	__u32 zero = 0;
	struct hina_zeros *z = bpf_map_lookup_elem(&zeros, &zero);
	if (z && n > 1 && n <= MAX_WORDS)
		bpf_xdp_store_bytes(ctx, UDP_END + HINA_HEADER_BYTES + 4, z->words, 4 * (n - 1));
}

static __always_inline void value_processor(__u32 *stored, __u8 *words, void *end, __u32 n, __u32 op, int first,
					    int complete)
{
	if (first) /* (a first arrival that completes its copy, a job of one, leaves the frame's words as they are) */
		write_words(stored, words, end, n);
	else if (!complete) {
		if (op == OP_ADD)
			absorb_add(stored, words, end, n);
		else if (op == OP_OR)
			absorb_or(stored, words, end, n);
		else
			absorb_max(stored, words, end, n);
	} else if (op == OP_ADD)
		combine_add(stored, words, end, n);
	else if (op == OP_OR)
		combine_or(stored, words, end, n);
	else
		combine_max(stored, words, end, n);
}

/* arrival_bitmap: first arrival, duplicate, stale, another run's copy; the value processor; completion.
 * docs/design.md, "The slot protocol", has the rules in this order. */
static __always_inline __u32 arrival_bitmap(struct hina_slot *s, __u32 v, struct hina_job *job, __u32 bit, __u8 *hina,
					    void *end)
{
	__u32 offset = be32(hina + AT_OFFSET), phase = be16(hina + AT_PHASE), op = hina[AT_OP];
	__u8 *words = hina + HINA_HEADER_BYTES;
	__u32 n = job->words, verdict;
	struct hina_copy *c = &s->copies[v], *other = &s->copies[v ^ 1];

	bpf_spin_lock(&s->lock);
	__u32 seen = c->bitmap;
	if (seen && (c->offset != offset || c->phase != phase)) {
		verdict = STALE_RUN_VERDICT; /* another run's chunk: refused to every member */
	} else if ((seen & bit) || (seen && c->counter == job->needed)) {
		/* the sender's bit is set, or it already left this complete copy */
		if (c->counter != job->needed) {
			/* the copy holds its words and waits for others: a duplicate, answered with who is
			 * counted, to every member the first time for this copy and to the sender after */
			verdict = c->pending ? PENDING_BACK : PENDING;
			c->pending = 1;
			pending_bitmap(words, end, seen);
		} else if (!job->parents || c->total)
			verdict = RESEND; /* complete: the sender lost its RESULT */
		else if ((seen & bit) && c->pending >= 2) {
			/* sent up, no total yet, and a recent repeat sent it up again: answered PENDING, one of
			 * the `needed - 1` repeats after each partial up again (the parent's PENDING resets it) */
			c->pending--;
			verdict = PENDING_BACK;
			pending_bitmap(words, end, seen);
		} else if (seen & bit) {
			c->pending = job->needed; /* the partial or the total was lost, or the parent waits: up again */
			verdict = RESEND_UP;
		} else
			verdict = DROPPED | DROP_STALE;
		if (verdict == RESEND || verdict == RESEND_UP)
			copy_out(s->words[v], words, end, n);
	} else {
		other->bitmap &= ~bit;
		seen |= bit;
		c->bitmap = seen;
		int first = seen == bit;
		value_processor(s->words[v], words, end, n, op, first, seen == job->full);
		if (first) {
			c->offset = offset;
			c->phase = phase;
			c->counter = 1;
			c->total = 0;
			c->pending = 0;
		} else {
			c->counter++;
		}
		verdict = seen != job->full ? CONSUMED : job->parents ? SEND_UP : COMPLETE;
		if (verdict == SEND_UP)
			c->last = hina[AT_WORKER_ID]; /* the total names it to the children if it completed the parent's too */
	}
	bpf_spin_unlock(&s->lock);
	return verdict;
}

/* The parent's PENDING counts this switch (its member id's bit in word 0): the parent holds the partial. */
static __always_inline int parent_counted(struct hina_job *job, __u8 *words, void *end)
{
	return (void *)(words + 4) <= end && job->member < MAX_WORKERS && (be32(words) >> job->member & 1);
}

/* from_parent (trees): a RESULT from the slot's parent.  A total must answer a copy this switch sent up
 * (complete, same offset and tag), once; a STALE_RUN refusal goes down as it came, the copy untouched.  A
 * PENDING for such a copy is never stored: down with this copy's bitmap where the parent counted this
 * switch, else the partial (lost on the way up) up again. */
static __always_inline __u32 from_parent(struct hina_slot *s, __u32 v, struct hina_job *job, __u8 *hina, void *end)
{
	__u32 verdict;
	struct hina_copy *c = &s->copies[v];
	__u8 *words = hina + HINA_HEADER_BYTES;
	if (hina[AT_FLAGS] & FLAG_STALE_RUN)
		return STALE_DOWN;
	int pending = hina[AT_FLAGS] & FLAG_PENDING, counted = pending && parent_counted(job, words, end);
	bpf_spin_lock(&s->lock);
	if (c->counter != job->needed || c->offset != be32(hina + AT_OFFSET) || c->phase != be16(hina + AT_PHASE)) {
		verdict = DROPPED | DROP_STALE;
	} else if (c->total) {
		verdict = DROPPED | DROP_DUPLICATE;
	} else if (counted) {
		c->pending = 0; /* the parent answered: the next repeat sends the partial up again */
		pending_bitmap(words, end, c->bitmap);
		verdict = PENDING_DOWN;
	} else if (pending) {
		copy_out(s->words[v], words, end, job->words);
		verdict = RESEND_UP;
	} else {
		write_words(s->words[v], words, end, job->words);
		c->total = 1;
		/* the worker whose UPDATE completed the job's copy: the one that completed this copy where the
		 * parent's total names this switch, else another subtree's */
		hina[AT_WORKER_ID] = hina[AT_WORKER_ID] == job->member ? c->last : OTHER_SUBTREE;
		verdict = TOTAL;
	}
	bpf_spin_unlock(&s->lock);
	return verdict;
}

/* The slot's parent: where a partial goes up, and the only source a total comes down from. */
static __always_inline __u64 parent_of(struct hina_job *job, __u32 slot)
{
	__u32 k = job->parents ? slot % job->parents : 0;
	if (k >= MAX_PARENTS)
		return NO_SOURCE;
	return job->auth[MAX_WORKERS + k];
}

/* A source known by its port alone (a parent switch; a member behind a plain switch): a raw source's port. */
static __always_inline __u64 port_id(__u64 source)
{
	return (__s64)source >= (__s64)RAW_IDS ? PORT_IDS | ((source >> 48) & (RAW_PORTS - 1)) : source;
}

/* Where a frame the rules emitted goes, and its header: the RESULT to every member, back to the sender,
 * or up to the slot's parent (which must be a port, else it is unsent). */
static __always_inline int emit(struct hina_totals *t, struct hina_meta *m, __u32 verdict, __u8 *hina,
				struct hina_job *job, __u32 job_id, __u32 port, __u32 slot)
{
	if (verdict == SEND_UP || verdict == RESEND_UP) {
		hina[AT_MSG_TYPE] = MSG_UPDATE;
		hina[AT_FLAGS] = 0;
		hina[AT_WORKER_ID] = job->member;
		__u64 parent = parent_of(job, slot);
		if (parent < PORT_IDS || parent >= PORT_IDS + MAX_PORTS) { /* a parent that is not behind a port */
			t->unsent++;
			return XDP_DROP;
		}
		tell(m, META_PORT_HOST, parent - PORT_IDS, job_id);
		return to_port(t, parent - PORT_IDS);
	}
	if (verdict == RESEND || verdict == PENDING_BACK) {
		__u32 worker = hina[AT_WORKER_ID] & (MAX_WORKERS - 1);
		hina[AT_MSG_TYPE] = MSG_RESULT;
		hina[AT_FLAGS] = verdict == RESEND ? FLAG_RESEND : FLAG_PENDING;
		/* back where it came from: a member at its own address gets it there, one known by its port
		 * alone through the port's host */
		tell(m, job->auth[worker] >= RAW_IDS ? META_SENDER : META_PORT_HOST, port, job_id);
		return to_port(t, port);
	}
	/* to every member: a RESULT, a refusal, a PENDING, a total or a refusal or a PENDING from the parent (a
	 * total the parent sent as a RESEND answers a repeat: it goes down flagged so) */
	hina[AT_MSG_TYPE] = MSG_RESULT;
	if (verdict == COMPLETE)
		hina[AT_FLAGS] = 0;
	else if (verdict == TOTAL)
		hina[AT_FLAGS] &= FLAG_RESEND;
	else if (verdict == STALE_RUN_VERDICT)
		hina[AT_FLAGS] = FLAG_STALE_RUN;
	else if (verdict == PENDING || verdict == PENDING_DOWN)
		hina[AT_FLAGS] = FLAG_PENDING;
	tell(m, META_GROUP, 0, job_id);
	m->seq = ++t->seq;
	void *group = bpf_map_lookup_elem(&groups, &job_id);
	if (!group) {
		t->unsent++;
		return XDP_DROP;
	}
	return bpf_redirect_map(group, 0, BPF_F_BROADCAST);
}

/* The pipeline on one hina frame: job_config, worker_auth (or the tree's parent check), slot_of, then
 * arrival_bitmap or from_parent, and emit.  Nothing here fails on a frame: what is refused is counted
 * by reason, for the switch and for the job it names. */
static __always_inline int ingress(struct xdp_md *ctx, struct hina_totals *t, struct hina_meta *m, __u8 *hina,
				   void *end, __u32 present, __u32 claimed, __u64 source, __u32 port)
{
	t->drops[0]++; /* frames seen */
	if (present < HINA_HEADER_BYTES || claimed < HINA_HEADER_BYTES || (void *)(hina + HINA_HEADER_BYTES) > end) {
		count_drop(t, NULL, DROP_TRUNCATED);
		return XDP_DROP;
	}
	/* job_config */
	__u32 msg_type = hina[AT_MSG_TYPE];
	if (msg_type != MSG_UPDATE && msg_type != MSG_RESULT) {
		count_drop(t, NULL, DROP_BAD_MSG_TYPE);
		return XDP_DROP;
	}
	if (hina[AT_OP] > OP_MAX) {
		count_drop(t, NULL, DROP_BAD_OP);
		return XDP_DROP;
	}
	__u32 job_id = be16(hina + AT_JOB_ID);
	struct hina_job *job = bpf_map_lookup_elem(&jobs, &job_id);
	if (!job) {
		count_drop(t, NULL, msg_type == MSG_RESULT ? DROP_BAD_MSG_TYPE : DROP_UNKNOWN_JOB);
		return XDP_DROP;
	}
	__u32 row = job->row;
	struct hina_job_counters *jc = bpf_map_lookup_elem(&counters, &row);
	if (!jc)
		return XDP_DROP;
	if (msg_type == MSG_RESULT && !job->parents) {
		count_drop(t, jc, DROP_BAD_MSG_TYPE);
		return XDP_DROP;
	}
	__u32 frame_bytes = job->frame_bytes;
	if (claimed != frame_bytes || present < frame_bytes) {
		count_drop(t, jc, claimed > frame_bytes && present >= frame_bytes ? DROP_BAD_LENGTH : DROP_TRUNCATED);
		return XDP_DROP;
	}
	/* worker_auth: a member of the job, speaking from its own source (or, known by its port, from there) */
	__u32 worker = hina[AT_WORKER_ID];
	if (msg_type == MSG_UPDATE) {
		if (worker >= job->workers) {
			count_drop(t, jc, DROP_BAD_WORKER);
			return XDP_DROP;
		}
		__u64 member = job->auth[worker & (MAX_WORKERS - 1)];
		if (member != source && member != port_id(source)) {
			count_drop(t, jc, DROP_UNAUTHORIZED);
			return XDP_DROP;
		}
	}
	/* slot_of */
	if (be16(hina + AT_COUNT) > job->words) {
		count_drop(t, jc, DROP_BAD_COUNT);
		return XDP_DROP;
	}
	__u32 pool_index = be16(hina + AT_POOL_INDEX), slot = pool_index & SLOT_MASK;
	if (slot < job->slot_base || slot >= job->slot_base + job->slots) {
		count_drop(t, jc, DROP_BAD_SLOT);
		return XDP_DROP;
	}
	struct hina_slot *s = bpf_map_lookup_elem(&slots, &slot);
	if (!s) {
		count_drop(t, jc, DROP_BAD_SLOT);
		return XDP_DROP;
	}
	__u32 v = (pool_index >> VERSION_SHIFT) & 1, verdict;
	if (msg_type == MSG_RESULT) {
		if (port_id(source) != parent_of(job, slot)) { /* tree_parent */
			count_drop(t, jc, DROP_NOT_PARENT);
			return XDP_DROP;
		}
		verdict = from_parent(s, v, job, hina, end);
	} else {
		verdict = arrival_bitmap(s, v, job, 1u << (worker & (MAX_WORKERS - 1)), hina, end);
	}
	switch (verdict) {
	case CONSUMED:
		jc->updates++;
		return XDP_DROP; /* absorbed: its words are in the copy */
	case COMPLETE:
		jc->updates++;
		jc->results++;
		break;
	case SEND_UP:
		jc->updates++;
		jc->sent_up++;
		break;
	case RESEND_UP:
		jc->resent_up++;
		break;
	case RESEND:
		jc->resends++;
		break;
	case TOTAL:
		jc->results++;
		break;
	case PENDING:
	case PENDING_BACK:
		count_drop(t, jc, DROP_DUPLICATE); /* counted, and answered with who is counted */
		/* fall through */
	case PENDING_DOWN:
		jc->pending++;
		pending_zeros(ctx, job->words);
		break;
	case STALE_RUN_VERDICT:
	case STALE_DOWN:
		count_drop(t, jc, DROP_STALE_RUN); /* counted, and refused to every member */
		break;
	default:
		count_drop(t, jc, verdict & 0xff);
		return XDP_DROP;
	}
	return emit(t, m, verdict, hina, job, job_id, port, slot);
}

SEC("xdp")
int hina_ingress(struct xdp_md *ctx)
{
	__u32 zero = 0, ifindex = ctx->ingress_ifindex;
	__u32 *switch_port = bpf_map_lookup_elem(&ports, &ifindex);
	if (!switch_port)
		return XDP_PASS; /* not one of this switch's ports */
	__u32 port = *switch_port;
	struct hina_totals *t = bpf_map_lookup_elem(&totals, &zero);
	if (!t)
		return XDP_ABORTED;
	/* room for the metadata first (it moves the packet pointers): where it goes, for the egress program */
	struct hina_meta *m = bpf_xdp_adjust_meta(ctx, -(int)sizeof(struct hina_meta)) ? NULL : meta_of(ctx);
	if (!m) { /* a driver without XDP metadata: nothing could be addressed */
		t->unsent++;
		return XDP_DROP;
	}
	__builtin_memset(m, 0, sizeof(*m));
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *eth = data;
	__u32 length = end - data;

	/* parser: IPv4 without options, UDP to HINA_UDP_PORT is hina; anything else goes by its MAC */
	if ((void *)(eth + UDP_END) > end || be16(eth + 12) != ETH_P_IPV4 || eth[ETH_BYTES] != IPV4_NO_OPTIONS ||
	    eth[ETH_BYTES + 9] != IPPROTO_UDP_ || be16(eth + IP_END + 2) != HINA_UDP_PORT)
		return mac_forward(ctx, t, m);
	__u32 claimed = be16(eth + IP_END + 4) - 8, present = length - UDP_END;
	if (present < HINA_HEADER_BYTES || be16(eth + IP_END + 4) < 8 + HINA_HEADER_BYTES) {
		t->drops[0]++;
		count_drop(t, NULL, DROP_TRUNCATED);
		return XDP_DROP;
	}
	if (ipv4_checksum(eth + ETH_BYTES) != be16(eth + ETH_BYTES + 10)) {
		t->drops[0]++;
		count_drop(t, NULL, DROP_BAD_CHECKSUM);
		return XDP_DROP;
	}
	/* the source: the ingress port, the IPv4 source and the UDP source port (hina.emulator.dataplane) */
	__u64 source = port < RAW_PORTS ? RAW_IDS | (__u64)port << 48 | (__u64)be32(eth + ETH_BYTES + 12) << 16 |
						  be16(eth + IP_END)
					: NO_SOURCE;
	return ingress(ctx, t, m, eth + UDP_END, end, present, claimed, source, port);
}

static __always_inline int unsent(void)
{
	__u32 zero = 0;
	struct hina_totals *t = bpf_map_lookup_elem(&totals, &zero);
	if (t)
		t->unsent++;
	return XDP_DROP;
}

/* The egress rewrite, once per copy leaving `port`: the switch's MAC and IPv4 address as the source,
 * UDP ports HINA_UDP_PORT and checksum 0, as the destination the port's host, a member's own address
 * (a replica) or the sender's (a RESULT sent back); then the IPv4 checksum.  A port without a host in
 * the topology keeps the frame's addresses.  Frames that are not hina leave as they came. */
static __always_inline int egress_rewrite(struct xdp_md *ctx, __u32 port)
{
	struct hina_meta *m = meta_of(ctx);
	__u8 *eth = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (!m || (m->kind != META_GROUP && m->kind != META_SENDER && m->kind != META_PORT_HOST))
		return XDP_PASS;
	if ((void *)(eth + UDP_END) > end)
		return XDP_PASS;
	__u8 mac[6], ip[4], udp[2];
	int to_address = 0;
	if (m->kind == META_GROUP) {
		__u32 key = port;
		struct hina_cursor *cursor = bpf_map_lookup_elem(&cursors, &key);
		if (!cursor)
			return unsent();
		__u32 index = cursor->seq == m->seq ? cursor->next : 0;
		cursor->seq = m->seq;
		cursor->next = index + 1;
		struct hina_replica_key rkey = {.job_id = m->job_id, .port = port, .index = index};
		struct hina_replica *r = bpf_map_lookup_elem(&replicas, &rkey);
		if (!r)
			return unsent(); /* a copy the group holds no replica for: a port's entries outnumber its members */
		if (r->address) {
			__builtin_memcpy(mac, r->mac, 6);
			__builtin_memcpy(ip, r->ip, 4);
			__builtin_memcpy(udp, r->udp_port, 2);
			to_address = 1;
		}
	} else if (m->kind == META_SENDER) { /* the frame's own source, read before it is overwritten */
		__builtin_memcpy(mac, eth + 6, 6);
		__builtin_memcpy(ip, eth + ETH_BYTES + 12, 4);
		__builtin_memcpy(udp, eth + IP_END, 2);
		to_address = 1;
	}
	struct hina_rewrite *rw = bpf_map_lookup_elem(&rewrite, &port);
	if (rw && rw->host) {
		__builtin_memcpy(eth, rw->dst_mac, 6);
		__builtin_memcpy(eth + 6, rw->src_mac, 6);
		__builtin_memcpy(eth + ETH_BYTES + 12, rw->src_ip, 4);
		__builtin_memcpy(eth + ETH_BYTES + 16, rw->dst_ip, 4);
		*(__u16 *)(eth + IP_END) = bpf_htons(HINA_UDP_PORT);
		*(__u16 *)(eth + IP_END + 2) = bpf_htons(HINA_UDP_PORT);
		*(__u16 *)(eth + IP_END + 6) = 0;
		if (to_address) {
			__builtin_memcpy(eth, mac, 6);
			__builtin_memcpy(eth + ETH_BYTES + 16, ip, 4);
			__builtin_memcpy(eth + IP_END + 2, udp, 2);
		}
	}
	*(__u16 *)(eth + ETH_BYTES + 10) = bpf_htons(ipv4_checksum(eth + ETH_BYTES));
	return XDP_PASS;
}

SEC("xdp/devmap")
int hina_egress(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->egress_ifindex;
	__u32 *port = bpf_map_lookup_elem(&ports, &ifindex);
	return port ? egress_rewrite(ctx, *port) : XDP_PASS;
}

/* The same rewrite as a plain XDP program, for BPF_PROG_TEST_RUN (which runs no devmap program): the
 * tests name the egress port through the ingress interface's entry in `ports`. */
SEC("xdp")
int hina_egress_test(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 *port = bpf_map_lookup_elem(&ports, &ifindex);
	return port ? egress_rewrite(ctx, *port) : XDP_PASS;
}

/* The control plane's changes to slot state, each slot under its lock (Command, run by BPF_PROG_TEST_RUN
 * on a frame holding the command): RESET empties every copy of the slots; CLEAR empties the copies an
 * earlier run left as `worker` joins: one holding its bit, a bit outside the job, or complete. */
static long control_slot(__u32 i, struct hina_command *cmd)
{
	__u32 key = cmd->base + i;
	struct hina_slot *s = bpf_map_lookup_elem(&slots, &key);
	if (!s)
		return 1;
	bpf_spin_lock(&s->lock);
	for (int v = 0; v < 2; v++) {
		struct hina_copy *c = &s->copies[v];
		__u32 seen = c->bitmap;
		if (cmd->op == CMD_RESET) {
			__builtin_memset(c, 0, sizeof(*c));
			for (__u32 w = 0; w < MAX_WORDS; w++) {
				s->words[v][w] = 0;
				asm volatile("" ::: "memory"); /* a loop, not a call to memset (BPF has none) */
			}
		} else if (seen && ((seen & (1u << (cmd->worker & (MAX_WORKERS - 1)))) || (seen & ~cmd->full) ||
				    c->counter >= cmd->needed)) {
			c->bitmap = 0;
			c->counter = 0;
			c->total = 0;
			cmd->cleared++;
		}
	}
	bpf_spin_unlock(&s->lock);
	return 0;
}

SEC("xdp")
int hina_control(struct xdp_md *ctx)
{
	struct hina_command cmd;
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	if (data + sizeof(cmd) > end)
		return XDP_ABORTED;
	__builtin_memcpy(&cmd, data, sizeof(cmd));
	bpf_loop(cmd.slots, control_slot, &cmd, 0);
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + sizeof(cmd) > end)
		return XDP_ABORTED;
	__builtin_memcpy(data, &cmd, sizeof(cmd));
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Apache-2.0";
