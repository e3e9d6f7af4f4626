/*
 * floor: the least work any flow meter has to do. One pass over the mmapped pcap, parse
 * Ethernet (+VLAN) / IPv4 / IPv6 / TCP / UDP headers, and count packets and bytes per
 * bidirectional 5-tuple in an open-addressing hash table. No TCP state, no output per flow.
 * bench/compare.sh builds it with gcc -O2 and uses it as the "floor" row.
 *
 * usage: floor TRACE.pcap      prints "packets N flows M"
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct key {                /* both endpoints ordered low/high so A->B and B->A match */
    uint8_t a[16], b[16];   /* IPv4 addresses use the first 4 bytes */
    uint16_t pa, pb;
    uint8_t proto, v6;
    uint8_t pad[2];
};

struct slot {
    struct key k;
    uint64_t packets, bytes;
    uint8_t used;
};

static struct slot *tab;
static size_t cap = 1 << 16, nflows;

static uint64_t hash(const struct key *k) {
    /* FNV-1a over the key: short, good enough for a table at <= 50 % load */
    const uint8_t *p = (const uint8_t *)k;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h ^ (h >> 29);
}

static struct slot *find(struct slot *t, size_t c, const struct key *k) {
    size_t i = hash(k) & (c - 1);
    while (t[i].used && memcmp(&t[i].k, k, sizeof *k) != 0) i = (i + 1) & (c - 1);
    return &t[i];
}

static void grow(void) {
    size_t nc = cap * 2;
    struct slot *nt = calloc(nc, sizeof *nt);
    if (!nt) { perror("calloc"); exit(1); }
    for (size_t i = 0; i < cap; i++)
        if (tab[i].used) *find(nt, nc, &tab[i].k) = tab[i];
    free(tab);
    tab = nt;
    cap = nc;
}

static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

static void account(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
    struct key k;
    memset(&k, 0, sizeof k);
    if (caplen < 14) return;
    uint16_t et = be16(p + 12);
    size_t off = 14;
    while ((et == 0x8100 || et == 0x88a8) && caplen >= off + 4) { et = be16(p + off + 2); off += 4; }
    const uint8_t *src, *dst;
    size_t alen, l4;
    if (et == 0x0800 && caplen >= off + 20) {
        const uint8_t *ip = p + off;
        k.proto = ip[9];
        src = ip + 12; dst = ip + 16; alen = 4;
        /* non-first fragments carry no ports */
        l4 = (be16(ip + 6) & 0x1fff) ? 0 : off + (size_t)(ip[0] & 15) * 4;
    } else if (et == 0x86dd && caplen >= off + 40) {
        const uint8_t *ip = p + off;
        k.proto = ip[6]; k.v6 = 1;
        src = ip + 8; dst = ip + 24; alen = 16;
        l4 = off + 40;     /* extension headers: counted as their own protocol, no ports */
    } else {
        return;            /* not IP: not a flow */
    }
    uint16_t sp = 0, dp = 0;
    if (l4 && (k.proto == 6 || k.proto == 17) && caplen >= l4 + 4) { sp = be16(p + l4); dp = be16(p + l4 + 2); }
    int c = memcmp(src, dst, alen);
    if (c < 0 || (c == 0 && sp <= dp)) {
        memcpy(k.a, src, alen); memcpy(k.b, dst, alen); k.pa = sp; k.pb = dp;
    } else {
        memcpy(k.a, dst, alen); memcpy(k.b, src, alen); k.pa = dp; k.pb = sp;
    }
    struct slot *s = find(tab, cap, &k);
    if (!s->used) {
        s->used = 1; s->k = k;
        if (++nflows * 2 > cap) { grow(); s = find(tab, cap, &k); }
    }
    s->packets++;
    s->bytes += wirelen;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: floor TRACE.pcap\n"); return 2; }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) { perror(argv[1]); return 1; }
    const uint8_t *m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 1; }
    madvise((void *)m, st.st_size, MADV_SEQUENTIAL);
    if (st.st_size < 24) { fprintf(stderr, "short file\n"); return 1; }
    uint32_t magic; memcpy(&magic, m, 4);
    /* native-order classic pcap only (us or ns); pcapng and swapped files are out of scope */
    if (magic != 0xa1b2c3d4 && magic != 0xa1b23c4d) { fprintf(stderr, "not a little-endian classic pcap\n"); return 1; }
    uint32_t linktype; memcpy(&linktype, m + 20, 4);
    if (linktype != 1) { fprintf(stderr, "linktype %u: only Ethernet\n", linktype); return 1; }
    tab = calloc(cap, sizeof *tab);
    uint64_t packets = 0;
    size_t off = 24, end = (size_t)st.st_size;
    while (off + 16 <= end) {
        uint32_t caplen, wirelen;
        memcpy(&caplen, m + off + 8, 4); memcpy(&wirelen, m + off + 12, 4);
        off += 16;
        if (caplen > end - off) break;       /* truncated last record */
        account(m + off, caplen, wirelen);
        off += caplen;
        packets++;
    }
    printf("packets %llu flows %zu\n", (unsigned long long)packets, nflows);
    return 0;
}
