/*
 * txring: sends a pcap trace on an interface as fast as the kernel takes it, through an
 * AF_PACKET socket with a memory-mapped transmit ring (PACKET_TX_RING, TPACKET_V2): the frames
 * of many packets are copied into the ring, then one send() hands them all to the kernel, which
 * builds the packets straight from the ring. bench/live_rate.sh (SENDER=txring) builds it with
 * gcc -O2 and uses it beside tcpreplay, which makes one system call per packet.
 *
 * usage: txring [--loops N] [--seconds S] [--pps N] [--batch N] [--ring-frames N]
 *               [--frame-size N] [--no-bypass] IFACE TRACE.pcap
 *
 * - The trace (classic pcap, either byte order, us or ns timestamps, Ethernet link type only) is
 *   read into memory once; its timestamps are not used. Each record's captured bytes are sent
 *   as they are (a record cut short by the capture's snapshot length is sent cut short).
 * - --loops N sends the trace N times (default 1; 0: no limit); --seconds S stops after S
 *   seconds (then the default is no limit of loops). Whichever comes first ends the run, as does
 *   SIGINT or SIGTERM (a second one kills at once).
 * - --pps N paces the sending: batches of N/1000 frames (at least 1, at most --batch) are handed
 *   over on a fixed schedule, the process sleeping (clock_nanosleep) until each batch is due.
 *   Without it, as fast as possible.
 * - A frame is skipped, and counted, when it is longer than a ring frame holds (--frame-size
 *   less the 32-byte header; by default the ring frame fits the trace's longest frame that the
 *   MTU allows), longer than the MTU plus its Ethernet header (plus 4 for an 802.1Q-tagged
 *   frame, as the kernel allows), or shorter than an Ethernet header.
 * - A frame counts as sent when the kernel gave its ring slot back (tp_status back to
 *   TP_STATUS_AVAILABLE: the packet was built and transmitted, its buffer released). A frame the
 *   device refused for lack of room (ENOBUFS: a veth whose peer's backlog is full) stays in the
 *   ring and is sent again (counted as a retry; after 1 ms of refusals, 50 us apart; after 5 s,
 *   the program gives up). Each batch, and so the last, is waited for (blocking send()) until
 *   every frame of it is given back: nothing is still queued when the program exits.
 * - PACKET_QDISC_BYPASS (unless --no-bypass): the packets go to the driver without the
 *   interface's queueing discipline, and so are not seen by captures on the sending interface.
 *
 * Output, on stdout, one line (seconds from the first frame handed over to the last given back):
 *   txring: sent N frames, skipped M, in S s: P packets/s, R Mbit/s (B bytes, T ENOBUFS retries)
 * Exit status: 0 done, 1 failure (with the reason on stderr), 2 bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DATA_OFF 32u /* where a TPACKET_V2 transmit frame's data begins, after its header */
_Static_assert(TPACKET2_HDRLEN - sizeof(struct sockaddr_ll) == DATA_OFF, "TPACKET_V2 data offset");
#define BUSY (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING)

enum skip { SEND, SKIP_SHORT, SKIP_MTU, SKIP_RING };

struct rec {
    const uint8_t *data;
    uint32_t len;
    uint32_t skip;          /* enum skip, decided once the MTU and ring frame are known */
};

/* The transmit ring and what has become of the frames put in it. */
struct ring {
    int fd;
    const char *ifname;
    uint8_t **slots;        /* slot i: frame i % per block of block i / per block */
    uint32_t *lens;         /* the length of the frame each slot holds, for the byte count */
    uint64_t frames;        /* slots in the ring */
    uint64_t head, tail;    /* frames put in the ring; frames given back (tail <= head) */
    uint64_t bytes, retries;
    double stalled_since;   /* when send() began returning with no frame given back, or 0 */
};

static const char *prog = "txring";
static volatile sig_atomic_t stop;

static void die(const char *what) {
    fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
    exit(1);
}

static void fail(const char *fmt, const char *arg) {
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(1);
}

static void usage(void) {
    fprintf(stderr,
            "usage: txring [--loops N] [--seconds S] [--pps N] [--batch N] [--ring-frames N]\n"
            "              [--frame-size N] [--no-bypass] IFACE TRACE.pcap\n"
            "  --loops N        send the trace N times (default 1; 0: no limit)\n"
            "  --seconds S      stop after S seconds (default: no limit; loops then default to 0)\n"
            "  --pps N          pace at N frames/s in batches (default: as fast as possible)\n"
            "  --batch N        frames handed over per send() (default 256)\n"
            "  --ring-frames N  frames in the transmit ring (default 1024)\n"
            "  --frame-size N   bytes per ring frame, header included, a multiple of 16\n"
            "                   (default: fits the trace's longest frame the MTU allows)\n"
            "  --no-bypass      go through the interface's queueing discipline\n");
    exit(2);
}

/* A whole number option, or usage. */
static uint64_t number(const char *opt, const char *s, uint64_t min, uint64_t max) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "%s: %s wants a whole number from %llu to %llu, not '%s'\n", prog, opt,
                (unsigned long long)min, (unsigned long long)max, s);
        usage();
    }
    return v;
}

static double now(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) < 0) die("clock_gettime");
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static uint32_t get32(const uint8_t *p, int swap) {
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
}

/* Reads the whole trace into memory and indexes its records; exits with a message on error. */
static struct rec *load(const char *path, size_t *count, uint8_t **buf) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) die(path);
    struct stat st;
    if (fstat(fd, &st) < 0) die(path);
    size_t size = (size_t)st.st_size;
    if (size < 24) fail("%s: too short for a pcap file", path);
    uint8_t *m = malloc(size);
    if (!m) die("malloc (the trace is read into memory)");
    for (size_t got = 0; got < size;) {
        ssize_t r = read(fd, m + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die(path);
        if (r == 0) fail("%s: shorter than its size (changed while read?)", path);
        got += (size_t)r;
    }
    if (close(fd) < 0) die(path);

    uint32_t magic;
    memcpy(&magic, m, 4);
    int swap;
    if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d) swap = 0;
    else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1) swap = 1;
    else if (magic == 0x0a0d0d0a) fail("%s: pcapng is not read here (editcap -F pcap makes a classic pcap)", path);
    else fail("%s: not a pcap file (unknown magic number)", path);
    uint32_t network = get32(m + 20, swap);
    if ((network & 0xffff) != 1) {
        fprintf(stderr, "%s: %s: link type %u: only Ethernet (1) is sent\n", prog, path, network & 0xffff);
        exit(1);
    }
    if (network & 0x10000000) fail("%s: the frames end with an FCS: not sent", path);

    size_t cap = 1024, n = 0, off = 24;
    struct rec *recs = malloc(cap * sizeof *recs);
    if (!recs) die("malloc");
    while (off + 16 <= size) {
        uint32_t caplen = get32(m + off + 8, swap);
        off += 16;
        if (caplen > size - off) {
            fprintf(stderr, "%s: %s: last record cut short (%u bytes announced, %zu left): not sent\n",
                    prog, path, caplen, size - off);
            off = size;
            break;
        }
        if (n == cap) {
            cap *= 2;
            struct rec *r = realloc(recs, cap * sizeof *recs);
            if (!r) die("realloc");
            recs = r;
        }
        recs[n].data = m + off;
        recs[n].len = caplen;
        recs[n].skip = SEND;
        n++;
        off += caplen;
    }
    if (off < size) /* fewer bytes than a record header */
        fprintf(stderr, "%s: %s: %zu bytes after the last record ignored\n", prog, path, size - off);
    *count = n;
    *buf = m;
    return recs;
}

/* Counts the frames the kernel gave back, oldest first (it sends them in ring order). */
static void reclaim(struct ring *tx) {
    while (tx->tail < tx->head) {
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)tx->slots[tx->tail % tx->frames];
        uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (st & BUSY) break;
        if (st & TP_STATUS_WRONG_FORMAT) {
            fprintf(stderr, "%s: the kernel refused a frame of %u bytes\n", prog, h->tp_len);
            exit(1);
        }
        tx->bytes += tx->lens[tx->tail % tx->frames];
        tx->tail++;
        tx->stalled_since = 0;
    }
}

/* Hands every frame marked SEND_REQUEST to the kernel; a blocking send() returns once they are
 * all given back. ENOBUFS (a frame the device had no room for, left marked) is retried by the
 * caller's next kick; a ring that stays stuck for 5 s ends the program. */
static void kick(struct ring *tx) {
    int refused = 0;
    if (send(tx->fd, NULL, 0, 0) < 0) {
        if (errno == ENOBUFS || errno == EAGAIN) refused = 1, tx->retries++;
        else if (errno != EINTR) {
            fprintf(stderr, "%s: send on %s: %s\n", prog, tx->ifname, strerror(errno));
            exit(1);
        }
    }
    uint64_t before = tx->tail;
    reclaim(tx);
    if (tx->tail != before || tx->tail == tx->head) return;
    if (tx->stalled_since == 0) tx->stalled_since = now();
    else if (refused && now() - tx->stalled_since > 0.001) {
        /* refused again and again for a millisecond: no use spinning on it */
        struct timespec pause = {0, 50000};
        if (nanosleep(&pause, NULL) < 0 && errno != EINTR) die("nanosleep");
    }
    if (now() - tx->stalled_since > 5) {
        fprintf(stderr, "%s: %s took no frame for 5 s (%llu ENOBUFS answers): is its peer up?\n", prog,
                tx->ifname, (unsigned long long)tx->retries);
        exit(1);
    }
}

int main(int argc, char **argv) {
    uint64_t loops = 1, pps = 0, batch = 256, ring_frames = 1024, frame_size = 0;
    double seconds = 0;
    int loops_set = 0, bypass = 1;
    static const struct option opts[] = {
        {"loops", required_argument, 0, 'l'},      {"seconds", required_argument, 0, 's'},
        {"pps", required_argument, 0, 'p'},        {"batch", required_argument, 0, 'b'},
        {"ring-frames", required_argument, 0, 'r'}, {"frame-size", required_argument, 0, 'f'},
        {"no-bypass", no_argument, 0, 'n'},        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
        switch (c) {
        case 'l': loops = number("--loops", optarg, 0, UINT64_MAX); loops_set = 1; break;
        case 's': {
            char *end;
            errno = 0;
            seconds = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(seconds > 0) || seconds > 1e9) {
                fprintf(stderr, "%s: --seconds wants a number of seconds above 0, not '%s'\n", prog, optarg);
                usage();
            }
            break;
        }
        case 'p': pps = number("--pps", optarg, 1, 1000000000); break;
        case 'b': batch = number("--batch", optarg, 1, 1 << 20); break;
        case 'r': ring_frames = number("--ring-frames", optarg, 1, 1 << 20); break;
        case 'f': frame_size = number("--frame-size", optarg, 64, 1 << 20); break;
        case 'n': bypass = 0; break;
        default: usage();
        }
    }
    if (argc - optind != 2) usage();
    if (frame_size % 16) {
        fprintf(stderr, "%s: --frame-size must be a multiple of 16 (TPACKET_ALIGNMENT)\n", prog);
        usage();
    }
    if (seconds > 0 && !loops_set) loops = 0;
    const char *ifname = argv[optind], *path = argv[optind + 1];

    size_t nrecs;
    uint8_t *trace;
    struct rec *recs = load(path, &nrecs, &trace);

    int fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: sends only, no copy of any traffic */
    if (fd < 0) die("socket(AF_PACKET) (root or CAP_NET_RAW needed)");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    if (strlen(ifname) >= sizeof ifr.ifr_name) fail("%s: interface name too long", ifname);
    strcpy(ifr.ifr_name, ifname);
    unsigned ifindex = if_nametoindex(ifname);
    if (!ifindex) {
        if (errno == ENODEV) fail("%s: no such interface (ip link)", ifname);
        die(ifname);
    }
    if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) die("SIOCGIFHWADDR");
    if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) fail("%s: not an Ethernet interface", ifname);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) die("SIOCGIFFLAGS");
    if (!(ifr.ifr_flags & IFF_UP)) fail("%s: interface down (ip link set it up)", ifname);
    if (ioctl(fd, SIOCGIFMTU, &ifr) < 0) die("SIOCGIFMTU");
    uint32_t mtu = (uint32_t)ifr.ifr_mtu;

    /* Which frames can go, and the ring frame that holds the longest of them. */
    uint32_t longest = 0;
    for (size_t i = 0; i < nrecs; i++) {
        struct rec *r = &recs[i];
        int tagged = r->len >= ETH_HLEN && r->data[12] == 0x81 && r->data[13] == 0x00;
        if (r->len < ETH_HLEN) r->skip = SKIP_SHORT;
        else if (r->len > mtu + ETH_HLEN + (tagged ? 4 : 0)) r->skip = SKIP_MTU;
        else if (frame_size && r->len > frame_size - DATA_OFF) r->skip = SKIP_RING;
        else if (r->len > longest) longest = r->len;
    }
    if (!longest) {
        fprintf(stderr, "%s: %s: no frame of its %zu can be sent on %s (MTU %u)\n", prog, path, nrecs, ifname, mtu);
        return 1;
    }
    if (!frame_size) frame_size = (DATA_OFF + longest + 15) / 16 * 16;
    if (frame_size < 64) frame_size = 64; /* the kernel wants room for the 52-byte TPACKET2_HDRLEN */

    /* Blocks of at least 64 KiB (a whole number of pages), as many as the ring's frames need. */
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) die("sysconf(_SC_PAGESIZE)");
    uint64_t block = frame_size > 65536 ? frame_size : 65536;
    block = (block + (uint64_t)page - 1) / (uint64_t)page * (uint64_t)page;
    uint64_t per_block = block / frame_size;
    uint64_t blocks = (ring_frames + per_block - 1) / per_block;
    if (block * blocks > UINT32_MAX) fail("%s: transmit ring over 4 GiB: fewer --ring-frames", ifname);
    struct tpacket_req req = {
        .tp_block_size = (unsigned)block,
        .tp_block_nr = (unsigned)blocks,
        .tp_frame_size = (unsigned)frame_size,
        .tp_frame_nr = (unsigned)(blocks * per_block),
    };
    ring_frames = req.tp_frame_nr;
    if (batch > ring_frames) batch = ring_frames;

    int v2 = TPACKET_V2, one = 1;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) < 0) die("PACKET_VERSION");
    if (bypass && setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) < 0) die("PACKET_QDISC_BYPASS");
    if (setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0) die("PACKET_TX_RING");
    size_t ring_bytes = (size_t)block * blocks;
    uint8_t *ring = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring == MAP_FAILED) die("mmap of the transmit ring");
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = 0, .sll_ifindex = (int)ifindex};
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) < 0) die("bind");

    struct ring tx = {.fd = fd, .ifname = ifname, .frames = ring_frames};
    tx.slots = malloc(ring_frames * sizeof *tx.slots);
    tx.lens = malloc(ring_frames * sizeof *tx.lens);
    if (!tx.slots || !tx.lens) die("malloc");
    for (uint64_t i = 0; i < ring_frames; i++) tx.slots[i] = ring + (i / per_block) * block + (i % per_block) * frame_size;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = (int)SA_RESETHAND; /* no SA_RESTART: a send() waiting returns, the second signal kills */
    if (sigemptyset(&sa.sa_mask) < 0 || sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0)
        die("sigaction");

    uint64_t skipped[4] = {0}, loop = 0;
    size_t pos = 0;
    int done = 0;
    uint64_t per_batch = batch;
    if (pps) {
        per_batch = pps / 1000;
        if (per_batch < 1) per_batch = 1;
        if (per_batch > batch) per_batch = batch;
    }
    struct timespec start_ts;
    if (clock_gettime(CLOCK_MONOTONIC, &start_ts) < 0) die("clock_gettime");
    double start = (double)start_ts.tv_sec + (double)start_ts.tv_nsec * 1e-9;

    while (!done && !stop) {
        if (seconds > 0 && now() - start >= seconds) break;
        if (pps) {
            /* the batch starting at frame number `head` is due at start + head / pps */
            uint64_t due_ns = (uint64_t)((double)tx.head * 1e9 / (double)pps);
            struct timespec due = {
                .tv_sec = start_ts.tv_sec + (time_t)(due_ns / 1000000000),
                .tv_nsec = start_ts.tv_nsec + (long)(due_ns % 1000000000),
            };
            if (due.tv_nsec >= 1000000000) { due.tv_sec++; due.tv_nsec -= 1000000000; }
            int e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL);
            if (e == EINTR) continue;
            if (e) { errno = e; die("clock_nanosleep"); }
        }
        for (uint64_t n = 0; n < per_batch;) {
            if (pos == nrecs) {
                pos = 0;
                if (++loop == loops) { done = 1; break; }
            }
            const struct rec *r = &recs[pos++];
            if (r->skip) { skipped[r->skip]++; continue; }
            uint8_t *slot = tx.slots[tx.head % tx.frames];
            struct tpacket2_hdr *h = (struct tpacket2_hdr *)slot;
            while (tx.head - tx.tail == tx.frames) kick(&tx); /* cannot happen: batch <= frames */
            if (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & BUSY) {
                fprintf(stderr, "%s: ring slot still in use (internal error)\n", prog);
                return 1;
            }
            memcpy(slot + DATA_OFF, r->data, r->len);
            h->tp_len = r->len;
            tx.lens[tx.head % tx.frames] = r->len;
            __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
            tx.head++;
            n++;
        }
        /* The batch is given back whole before the next is written (and before the end). */
        while (tx.tail < tx.head) kick(&tx);
    }
    double secs = now() - start;

    uint64_t skip_all = skipped[SKIP_SHORT] + skipped[SKIP_MTU] + skipped[SKIP_RING];
    if (skip_all)
        fprintf(stderr, "%s: skipped %llu frames: %llu longer than the MTU (%u) allows, %llu longer than a ring frame "
                "holds (%llu), %llu shorter than an Ethernet header\n", prog, (unsigned long long)skip_all,
                (unsigned long long)skipped[SKIP_MTU], mtu, (unsigned long long)skipped[SKIP_RING],
                (unsigned long long)(frame_size - DATA_OFF), (unsigned long long)skipped[SKIP_SHORT]);
    printf("txring: sent %llu frames, skipped %llu, in %.6f s: %.0f packets/s, %.2f Mbit/s (%llu bytes, %llu ENOBUFS retries)\n",
           (unsigned long long)tx.tail, (unsigned long long)skip_all, secs, secs > 0 ? (double)tx.tail / secs : 0.0,
           secs > 0 ? (double)tx.bytes * 8 / secs / 1e6 : 0.0, (unsigned long long)tx.bytes,
           (unsigned long long)tx.retries);
    if (fflush(stdout) == EOF) die("stdout");
    if (munmap(ring, ring_bytes) < 0) die("munmap");
    if (close(fd) < 0) die("close");
    free(tx.slots);
    free(tx.lens);
    free(recs);
    free(trace);
    return 0;
}
