/* schema_num.c — digit-range expressions for bounded integers and decimals (schema_num.h).
 *
 * Integers: the range is split by digit count; a same-length range [a, b] is a common prefix, then
 * (first digit of a, the rest >= a's rest) | (digits strictly between, anything) | (first digit of
 * b, the rest <= b's rest), folded to one class where a's rest is all 0 and b's all 9.
 * Decimals: integer part Ilo (fraction >= lo's), Ilo+1..Ihi-1 (any fraction), Ihi (fraction <=
 * hi's); fractions are canonical (no trailing zero) so each value has one spelling and a strict
 * bound excludes exactly one string; frac() walks the bound digits left to right. */
#include "grammar/schema_num.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cls(buf *o, char a, char b) {
    if (a == b) buf_printf(o, "\"%c\"", a);
    else buf_printf(o, "[%c-%c]", a, b);
}

static void digits_any(buf *o, int r) {
    if (r > 0) buf_printf(o, " [0-9]{%d}", r);
}

static bool all_of(const char *s, int n, char c) {
    for (int i = 0; i < n; i++)
        if (s[i] != c) return false;
    return true;
}

/* Same-length digit strings a <= b, length L >= 1. */
static void nat_fixed(buf *o, const char *a, const char *b, int L) {
    int p = 0;
    while (p < L && a[p] == b[p]) p++;
    if (p == L) {
        buf_printf(o, "\"%.*s\"", L, a);
        return;
    }
    if (p) buf_printf(o, "\"%.*s\" ", p, a);
    int r = L - p - 1;
    bool a0 = all_of(a + p + 1, r, '0'), b9 = all_of(b + p + 1, r, '9');
    char mlo = a0 ? a[p] : (char)(a[p] + 1), mhi = b9 ? b[p] : (char)(b[p] - 1);
    int n = 0;
    buf_puts(o, "( ");
    if (!a0) {
        char nines[24];
        memset(nines, '9', (size_t)r);
        buf_printf(o, "\"%c\" ", a[p]);
        nat_fixed(o, a + p + 1, nines, r);
        n++;
    }
    if (mlo <= mhi) {
        if (n++) buf_puts(o, " | ");
        cls(o, mlo, mhi);
        digits_any(o, r);
    }
    if (!b9) {
        char zeros[24];
        memset(zeros, '0', (size_t)r);
        if (n++) buf_puts(o, " | ");
        buf_printf(o, "\"%c\" ", b[p]);
        nat_fixed(o, zeros, b + p + 1, r);
    }
    buf_puts(o, " )");
}

static int n_digits(long long v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static long long pow10ll(int e) {
    long long p = 1;
    while (e-- > 0) p *= 10;
    return p;
}

/* Non-negative integers in [a, b], a <= b <= SN_INT_MAX, as one group. */
static void nat_range(buf *o, long long a, long long b) {
    buf_puts(o, "( ");
    int la = n_digits(a), lb = n_digits(b), n = 0;
    for (int L = la; L <= lb; L++) {
        long long first = L == 1 ? 0 : pow10ll(L - 1), last = pow10ll(L) - 1;
        long long lo = a > first ? a : first, hi = b < last ? b : last;
        if (n++) buf_puts(o, " | ");
        if (L >= 2 && lo == first && hi == last) { /* whole lengths: one repetition */
            int L2 = L;
            while (L2 + 1 <= lb && b >= pow10ll(L2 + 1) - 1) L2++;
            if (L2 == L) buf_printf(o, "[1-9] [0-9]{%d}", L - 1);
            else buf_printf(o, "[1-9] [0-9]{%d,%d}", L - 1, L2 - 1);
            L = L2;
            continue;
        }
        char sa[24], sb[24];
        snprintf(sa, sizeof sa, "%lld", lo);
        snprintf(sb, sizeof sb, "%lld", hi);
        nat_fixed(o, sa, sb, L);
    }
    buf_puts(o, " )");
}

void sn_int_range(buf *out, long long lo, long long hi) {
    buf_puts(out, "( ");
    if (lo < 0) {
        long long mlo = hi < 0 ? -hi : 1;
        buf_puts(out, "\"-\" ");
        nat_range(out, mlo, -lo);
    }
    if (hi >= 0) {
        if (lo < 0) buf_puts(out, " | ");
        nat_range(out, lo > 0 ? lo : 0, hi);
    }
    buf_puts(out, " )");
}

bool sn_dec_of(double v, sn_dec *d) {
    if (!isfinite(v)) return false;
    memset(d, 0, sizeof *d);
    if (v == 0) {
        strcpy(d->ip, "0");
        return true;
    }
    d->neg = v < 0;
    char t[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(t, sizeof t, "%.*e", prec - 1, fabs(v));
        if (strtod(t, NULL) == fabs(v)) break;
    }
    char dig[24];
    int p = 0;
    const char *q = t;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') dig[p++] = *q;
    int e = atoi(q + 1), point = e + 1; /* digits before the decimal point */
    if (point > 20 || p - point > 20) return false;
    if (point <= 0) {
        strcpy(d->ip, "0");
        memset(d->fp, '0', (size_t)-point);
        memcpy(d->fp - point, dig, (size_t)p);
    } else if (point >= p) {
        memcpy(d->ip, dig, (size_t)p);
        memset(d->ip + p, '0', (size_t)(point - p));
    } else {
        memcpy(d->ip, dig, (size_t)point);
        memcpy(d->fp, dig + point, (size_t)(p - point));
    }
    for (size_t n = strlen(d->fp); n && d->fp[n - 1] == '0'; n--) d->fp[n - 1] = 0;
    return true;
}

int sn_dec_sig(const sn_dec *d) {
    if (strcmp(d->ip, "0")) return (int)(strlen(d->ip) + strlen(d->fp));
    const char *f = d->fp;
    while (*f == '0') f++;
    return (int)strlen(f);
}

static void alt(buf *o, int *n) {
    if ((*n)++) buf_puts(o, " | ");
}

/* A nonempty canonical tail of at most r digits (r >= 1). */
static void tail_ne(buf *o, int r) {
    if (r > 1) buf_printf(o, "[0-9]{0,%d} ", r - 1);
    buf_puts(o, "[1-9]");
}

/* Fraction digit strings t from position i (the fraction so far equals the bounds' first i digits
 * where tl/th) with lo <(=) t (when tl) and t <(=) hi (when th) as decimals 0.t, canonical (no
 * trailing zero; last_nz: the digit before i is not 0, or i == 0), at most fmax digits in all.
 * At i == 0 a nonempty t is written with its "." and the empty t means no fraction. Writes the
 * alternatives joined by " | " and returns their number. */
static int frac(buf *o, const char *lo, bool tl, bool lx, const char *hi, bool th, bool hx, int i, int fmax,
                bool last_nz) {
    bool need_ne = false; /* t must be nonempty (> 0) */
    if (tl && i >= (int)strlen(lo)) tl = false, need_ne = lx;
    int n = 0;
    if (th && i >= (int)strlen(hi)) { /* t <= 0: only the empty t */
        if (!hx && last_nz && !need_ne && !tl) alt(o, &n), buf_puts(o, "\"\"");
        return n;
    }
    const char *dot = i == 0 ? "\".\" " : "";
    int r = fmax - i;
    if (last_nz && !need_ne && !tl) alt(o, &n), buf_puts(o, "\"\"");
    if (r <= 0) return n;
    if (!tl && !th) {
        alt(o, &n);
        buf_puts(o, dot);
        tail_ne(o, r);
        return n;
    }
    char dl = tl ? lo[i] : '0', dh = th ? hi[i] : '9';
    if (dl > dh) return n;
    char mlo = tl ? (char)(dl + 1) : '0', mhi = th ? (char)(dh - 1) : '9';
    if (mlo <= mhi) {
        char nz = mlo > '1' ? mlo : '1';
        if (nz <= mhi) {
            alt(o, &n);
            buf_puts(o, dot);
            cls(o, nz, mhi);
            if (r > 1) buf_puts(o, " ( "), tail_ne(o, r - 1), buf_puts(o, " )?");
        }
        if (mlo == '0' && r > 1) alt(o, &n), buf_printf(o, "%s\"0\" ", dot), tail_ne(o, r - 1);
    }
    for (int side = 0; side < 2; side++) {
        if (side == 0 ? !tl : (!th || (tl && dl == dh))) continue;
        char c = side == 0 ? dl : dh;
        buf sub = buf_make(o->a);
        int k = side == 0 ? frac(&sub, lo, true, lx, hi, th && dh == dl, hx, i + 1, fmax, c != '0')
                          : frac(&sub, lo, false, lx, hi, true, hx, i + 1, fmax, c != '0');
        if (k) {
            alt(o, &n);
            buf_printf(o, "%s\"%c\" ( %s )", dot, c, sub.p ? sub.p : "");
        }
        if (sub.oom) o->oom = true;
        buf_free(&sub);
    }
    return n;
}

static bool parse_ip(const char *ip, int imax, long long *v) {
    if ((int)strlen(ip) > imax) return false;
    *v = atoll(ip);
    return true;
}

/* Magnitudes m >= 0 with lo <(=) m <(=) hi (lo NULL: 0 inclusive; hi NULL: none). */
static int mag_range(buf *o, const sn_dec *lo, bool lx, const sn_dec *hi, bool hx, int imax, int fmax) {
    static const sn_dec zero = {false, "0", ""};
    if (!lo) lo = &zero, lx = false;
    long long ilo, ihi = pow10ll(imax) - 1;
    if (!parse_ip(lo->ip, imax, &ilo)) return 0;
    if (hi && !parse_ip(hi->ip, imax, &ihi)) hi = NULL;
    if (hi && ilo > ihi) return 0;
    int n = 0;
    buf sub = buf_make(o->a);
    if (hi && ilo == ihi) {
        if (frac(&sub, lo->fp, true, lx, hi->fp, true, hx, 0, fmax, true))
            alt(o, &n), buf_printf(o, "\"%lld\" ( %s )", ilo, sub.p ? sub.p : "");
    } else {
        if (frac(&sub, lo->fp, true, lx, "", false, false, 0, fmax, true))
            alt(o, &n), buf_printf(o, "\"%lld\" ( %s )", ilo, sub.p ? sub.p : "");
        long long mlo = ilo + 1, mhi = hi ? ihi - 1 : ihi;
        if (mlo <= mhi) {
            alt(o, &n);
            nat_range(o, mlo, mhi);
            if (fmax > 0) buf_puts(o, " ( \".\" "), tail_ne(o, fmax), buf_puts(o, " )?");
        }
        buf_truncate(&sub, 0);
        if (hi && frac(&sub, "", false, false, hi->fp, true, hx, 0, fmax, true))
            alt(o, &n), buf_printf(o, "\"%lld\" ( %s )", ihi, sub.p ? sub.p : "");
    }
    if (sub.oom) o->oom = true;
    buf_free(&sub);
    return n;
}

bool sn_dec_range(buf *out, const sn_dec *lo, bool lx, const sn_dec *hi, bool hx, int imax, int fmax) {
    size_t mark = out->n;
    buf_puts(out, "( ");
    int n = 0;
    if (!(hi && hi->neg)) { /* x >= 0 */
        buf pos = buf_make(out->a);
        if (mag_range(&pos, lo && !lo->neg ? lo : NULL, lo && !lo->neg && lx, hi, hx, imax, fmax))
            alt(out, &n), buf_puts(out, pos.p ? pos.p : "");
        if (pos.oom) out->oom = true;
        buf_free(&pos);
    }
    if (!lo || lo->neg) { /* x < 0: magnitude above |hi| or 0, up to |lo| */
        static const sn_dec zero = {false, "0", ""};
        sn_dec mlo = zero, mhi;
        bool mlx = true;
        if (hi && hi->neg) mlo = *hi, mlo.neg = false, mlx = hx;
        if (lo) mhi = *lo, mhi.neg = false;
        buf neg = buf_make(out->a);
        if (mag_range(&neg, &mlo, mlx, lo ? &mhi : NULL, lx, imax, fmax))
            alt(out, &n), buf_printf(out, "\"-\" ( %s )", neg.p ? neg.p : "");
        if (neg.oom) out->oom = true;
        buf_free(&neg);
    }
    buf_puts(out, " )");
    if (!n) buf_truncate(out, mark);
    return n > 0;
}
