/* formats.c — JSON Schema "format" names as anchored ECMAScript regexes (gr_format_regex, regex.h),
 * compiled to grammar rules by gr_regex_to_gbnf like any pattern.
 *
 * Each regex derives a subset of what the format allows: every string it matches passes
 * python-jsonschema's FormatChecker with the format extras (rfc3339-validator, fqdn, rfc3987,
 * isoduration) and the RFC the format names; where the full language is impractical the subset is
 * stated beside it (and in docs/grammar.md). scripts/check-regex-samples.py samples the grammars and
 * checks every sample with FormatChecker. */
#include <string.h>

#include "grammar/regex.h"

#define DIG "[0-9]"
#define HEX "[0-9A-Fa-f]"
/* 0-255 without leading zeros (Python's ipaddress refuses them) */
#define OCTET "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
#define IPV4 OCTET "(?:\\." OCTET "){3}"
/* RFC 3986 IPv6address: 8 groups, or fewer with one "::" standing for at least one group */
#define H16 HEX "{1,4}"
#define LS32 "(?:" H16 ":" H16 "|" IPV4 ")"
#define IPV6                                                                                                  \
    "(?:(?:" H16 ":){6}" LS32 "|::(?:" H16 ":){5}" LS32 "|(?:" H16 ")?::(?:" H16 ":){4}" LS32                 \
    "|(?:(?:" H16 ":){0,1}" H16 ")?::(?:" H16 ":){3}" LS32 "|(?:(?:" H16 ":){0,2}" H16 ")?::(?:" H16 ":){2}"  \
    LS32 "|(?:(?:" H16 ":){0,3}" H16 ")?::" H16 ":" LS32 "|(?:(?:" H16 ":){0,4}" H16 ")?::" LS32              \
    "|(?:(?:" H16 ":){0,5}" H16 ")?::" H16 "|(?:(?:" H16 ":){0,6}" H16 ")?::)"
/* RFC 1123 labels: letters, digits, inner hyphens. Subset: the first label up to 63 characters,
 * at most 7 more of up to 26, so the name stays within 253 characters. */
#define LABEL63 "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define LABEL26 "[A-Za-z0-9](?:[A-Za-z0-9-]{0,24}[A-Za-z0-9])?"
#define HOSTNAME LABEL63 "(?:\\." LABEL26 "){0,7}"
/* RFC 3339 full-date: years 0001-9999, days within the month, 29 February in leap years */
#define YEAR "(?:" DIG "{3}[1-9]|" DIG "{2}[1-9]" DIG "|" DIG "[1-9]" DIG "{2}|[1-9]" DIG "{3})"
#define LEAP_YEAR "(?:" DIG "{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
#define DATE                                                                                                  \
    "(?:" YEAR "-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)" \
    "|" LEAP_YEAR "-02-29)"
/* RFC 3339 full-time, upper-case Z; no leap second (rfc3339-validator refuses 60); fractions of
 * up to 9 digits */
#define TIME                                                                                                  \
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
/* RFC 3986 URI pieces; the host is a reg-name (which includes dotted IPv4), no IP literal */
#define UNRESERVED "A-Za-z0-9._~\\-"
#define SUBDELIMS "!$&'()*+,;="
#define PCT "%" HEX "{2}"
#define PCHAR "(?:[" UNRESERVED SUBDELIMS ":@]|" PCT ")"
#define SEGMENT PCHAR "*"
#define SEGMENT_NZ PCHAR "+"
#define SEGMENT_NZ_NC "(?:[" UNRESERVED SUBDELIMS "@]|" PCT ")+"
#define QUERY "(?:\\?(?:" PCHAR "|[/?])*)?(?:#(?:" PCHAR "|[/?])*)?"
#define AUTHORITY "(?:(?:[" UNRESERVED SUBDELIMS ":]|" PCT ")*@)?(?:[" UNRESERVED SUBDELIMS "]|" PCT ")*(?::[0-9]*)?"
#define PATH_ABEMPTY "(?:/" SEGMENT ")*"
#define PATH_ABSOLUTE "/(?:" SEGMENT_NZ "(?:/" SEGMENT ")*)?"
#define SCHEME "[A-Za-z][A-Za-z0-9+.\\-]*"
#define URI SCHEME ":(?://" AUTHORITY PATH_ABEMPTY "|" PATH_ABSOLUTE "|" SEGMENT_NZ "(?:/" SEGMENT ")*)?" QUERY
#define RELATIVE_REF "(?://" AUTHORITY PATH_ABEMPTY "|" PATH_ABSOLUTE "|" SEGMENT_NZ_NC "(?:/" SEGMENT ")*)?" QUERY
/* RFC 3339 Appendix A duration (components in order, none skipped inside the date or time part) */
#define DUR_TIME "T(?:" DIG "+H(?:" DIG "+M(?:" DIG "+S)?)?|" DIG "+M(?:" DIG "+S)?|" DIG "+S)"
#define DUR_DATE "(?:" DIG "+D|" DIG "+M(?:" DIG "+D)?|" DIG "+Y(?:" DIG "+M(?:" DIG "+D)?)?)(?:" DUR_TIME ")?"
/* email: a dot-atom local part (RFC 5322 atext) @ a host name of at least two labels */
#define ATEXT "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]"

static const struct {
    const char *name, *regex;
} formats[] = {
    {"date", "^" DATE "$"},
    {"time", "^" TIME "$"},
    {"date-time", "^" DATE "T" TIME "$"},
    {"duration", "^P(?:" DUR_DATE "|" DUR_TIME "|" DIG "+W)$"},
    {"email", "^" ATEXT "+(?:\\." ATEXT "+)*@" LABEL63 "(?:\\." LABEL26 "){1,7}$"},
    {"hostname", "^" HOSTNAME "$"},
    {"ipv4", "^" IPV4 "$"},
    {"ipv6", "^" IPV6 "$"},
    {"uri", "^" URI "$"},
    {"uri-reference", "^(?:" URI "|" RELATIVE_REF ")$"},
    {"uuid", "^" HEX "{8}-" HEX "{4}-" HEX "{4}-" HEX "{4}-" HEX "{12}$"},
    {"json-pointer", "^(?:/(?:[^~/]|~[01])*)*$"},
};

const char *gr_format_regex(const char *format) {
    if (!format) return NULL;
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (!strcmp(format, formats[i].name)) return formats[i].regex;
    return NULL;
}
