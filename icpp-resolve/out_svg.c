/* out_svg.c -- the interactive flame graph: one self-contained SVG with embedded JavaScript, root at the bottom. */
#include "output.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Layout.  A frame is a row SVG_ROW high; its width is its inclusive weight
 * of the chosen event times `scale`.  Frames are laid out like flamegraph.pl:
 * the virtual root "all" at the bottom, callees above their callers,
 * siblings left to right heaviest first, a caller's self weight the gap to
 * the right of its callees.  The unattributed rows ("[missing] f",
 * "[unresolved: why] m:f") are callees of "all", in their own colours. */
#define SVG_W      1200.0               /* image width, px */
#define SVG_XPAD   10.0                 /* left and right margin */
#define SVG_ROW    16                   /* row pitch: a 15 px frame and a 1 px gap */
#define SVG_FONT   12                   /* label font size, px (monospace) */
#define SVG_CHARW  (0.61 * SVG_FONT)    /* advance of one monospace glyph, to clip labels */
#define SVG_MINW   0.1                  /* frames narrower than this (px) are left out */
#define SVG_LINE   16                   /* header line pitch */

enum { K_PATH, K_MISSING, K_UNRESOLVED, K_ALL };

/* One frame as drawn. */
typedef struct svg_frame {
    const char   *name;
    int           kind;                 /* K_* */
    double        x;                    /* left edge, px */
    uint32_t      depth;                /* 0 = "all" */
    const double *incl, *self;          /* per event */
    double        amb_self, amb_incl;   /* ambiguous part of self / inclusive, chosen event */
} svg_frame;

typedef struct svg_ctx {
    const profile *p;
    FILE          *f;
    uint32_t       ev;                  /* the event that gives the widths */
    double         scale;               /* px per unit of weight */
    double         bottom;              /* y of the bottom edge of the "all" row */
    uint32_t      *kid_off, *kids;      /* child lists (CSR), heaviest first */
    double        *amb_incl;            /* inclusive ambiguous weight per node, chosen event */
} svg_ctx;

/* ---- text ---- */

/* Length of the well-formed UTF-8 character at s that XML 1.0 allows, or 0. */
static int utf8_char(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return c >= 0x20 || c == '\n' ? 1 : 0;
    if (c >= 0xC2 && c <= 0xDF)
        return (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))
            return 0;                   /* overlong, surrogate */
        if (c == 0xEF && s[1] == 0xBF && s[2] >= 0xBE)
            return 0;                   /* U+FFFE, U+FFFF */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if ((s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

/* Characters of s, counting each byte that is not valid UTF-8 as one. */
static size_t xml_len(const char *s)
{
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; n++) {
        int l = utf8_char(c);
        c += l ? l : 1;
    }
    return n;
}

/* s escaped for XML text and attribute values, at most `max` characters;
 * bytes that are not valid UTF-8 or not allowed in XML become '?'. */
void xml_put(FILE *f, const char *s, size_t max)
{
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c && n < max; n++) {
        int l = utf8_char(c);
        switch (l ? *c : 0) {
        case 0: fputc('?', f); c++; continue;
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: fwrite(c, 1, (size_t)l, f);
        }
        c += l;
    }
}

/* A label that fits w px: the whole name, its head and "..", or nothing.
 * The script's fit() does the same when zooming. */
static void put_label(FILE *f, const char *name, double w)
{
    double room = floor((w - 6) / SVG_CHARW);
    if (room < 3)
        return;
    size_t n = xml_len(name);
    if ((double)n <= room) {
        xml_put(f, name, n);
    } else {
        xml_put(f, name, (size_t)room - 2);
        fputs("..", f);
    }
}

/* A weight: whole numbers without decimals, shares of ambiguous samples with two. */
static const char *wstr(double w, char *buf, size_t sz)
{
    snprintf(buf, sz, fabs(w - round(w)) < 1e-6 ? "%.0f" : "%.2f", w);
    return buf;
}

static double pct(double a, double b)
{
    return b > 0 ? 100.0 * a / b : 0.0;
}

/* ---- frames ---- */

static unsigned name_hash(const char *s)
{
    unsigned h = 2166136261u;           /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Warm colours for paths (flamegraph.pl's "hot"), stable per name; cool ones
 * for samples without a path. */
static void put_fill(FILE *f, const svg_frame *fr)
{
    unsigned h = name_hash(fr->name);
    double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0, v3 = ((h >> 16) & 0xff) / 255.0;
    int r, g, b;
    switch (fr->kind) {
    case K_MISSING: r = 90 + (int)(40 * v1), g = 150 + (int)(40 * v1), b = 225 + (int)(30 * v2); break;
    case K_UNRESOLVED: r = 160 + (int)(30 * v1), g = 160 + (int)(30 * v1), b = 170 + (int)(30 * v1); break;
    case K_ALL: r = 220, g = 205, b = 185; break;
    default: r = 205 + (int)(50 * v3), g = (int)(230 * v1), b = (int)(55 * v2);
    }
    fprintf(f, "rgb(%d,%d,%d)", r, g, b);
}

static void put_frame(const svg_ctx *c, const svg_frame *fr)
{
    const profile *p = c->p;
    FILE *f = c->f;
    double t = prof_total(p, c->ev), w = fr->incl[c->ev] * c->scale, y = c->bottom - (fr->depth + 1) * SVG_ROW;
    char b1[64], b2[64];
    fputs("<g class=\"f\"><title>", f);
    xml_put(f, fr->name, SIZE_MAX);
    fprintf(f, "\ninclusive: %s %s samples, %.2f%%", wstr(fr->incl[c->ev], b1, sizeof b1), p->ev_names[c->ev],
            pct(fr->incl[c->ev], t));
    fprintf(f, "\nself: %s, %.2f%%", wstr(fr->self[c->ev], b1, sizeof b1), pct(fr->self[c->ev], t));
    for (uint32_t e = 0; e < p->nev; e++)
        if (e != c->ev)
            fprintf(f, "\n%s: inclusive %s (%.2f%%), self %s (%.2f%%)", p->ev_names[e],
                    wstr(fr->incl[e], b1, sizeof b1), pct(fr->incl[e], prof_total(p, e)),
                    wstr(fr->self[e], b2, sizeof b2), pct(fr->self[e], prof_total(p, e)));
    if (fr->kind == K_PATH)
        fprintf(f, "\nambiguous: %.1f%% of self, %.1f%% of inclusive", pct(fr->amb_self, fr->self[c->ev]),
                pct(fr->amb_incl, fr->incl[c->ev]));
    else if (fr->kind == K_ALL)
        fprintf(f, "\nambiguous: %.1f%% of inclusive", pct(fr->amb_incl, fr->incl[c->ev]));
    else if (fr->kind == K_MISSING)
        fputs("\nno path: this (function, height) never occurred in training", f);
    else if (fr->kind == K_UNRESOLVED)
        fputs("\nno path: the sample could not be resolved (reason in brackets)", f);
    fprintf(f, "</title><rect x=\"%.3f\" y=\"%.0f\" width=\"%.3f\" height=\"%d\" rx=\"2\" ry=\"2\" fill=\"", fr->x, y, w,
            SVG_ROW - 1);
    put_fill(f, fr);
    fprintf(f, "\"/><text x=\"%.3f\" y=\"%.1f\">", fr->x + 3, y + 11.5);
    put_label(f, fr->name, w);
    fputs("</text></g>\n", f);
}

static int kid_cmp(const void *a, const void *b, void *arg)
{
    const svg_ctx *c = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    double wx = c->p->incl[(size_t)x * PROF_MAX_EVENTS + c->ev], wy = c->p->incl[(size_t)y * PROF_MAX_EVENTS + c->ev];
    if (wx != wy)
        return wx > wy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Child lists of the nodes with weight, each heaviest first. */
static int build_kids(svg_ctx *c)
{
    const profile *p = c->p;
    size_t n = p->nframes;
    c->kid_off = calloc(n + 2, sizeof *c->kid_off);
    c->kids = malloc((n + 1) * sizeof *c->kids);
    c->amb_incl = calloc(n + 1, sizeof *c->amb_incl);
    if (!c->kid_off || !c->kids || !c->amb_incl)
        return -1;
    for (size_t i = 1; i < n; i++)
        if (p->incl[i * PROF_MAX_EVENTS + c->ev] > 0)
            c->kid_off[p->frames[i].parent + 2]++;
    for (size_t i = 2; i < n + 2; i++)
        c->kid_off[i] += c->kid_off[i - 1];
    for (size_t i = 1; i < n; i++)
        if (p->incl[i * PROF_MAX_EVENTS + c->ev] > 0)
            c->kids[c->kid_off[p->frames[i].parent + 1]++] = (uint32_t)i;
    for (size_t i = 0; i < n; i++)
        qsort_r(c->kids + c->kid_off[i], c->kid_off[i + 1] - c->kid_off[i], sizeof *c->kids, kid_cmp, c);
    /* Children come after parents: sum the ambiguous parts up from the end. */
    for (size_t i = 0; i < n; i++)
        c->amb_incl[i] = p->self_amb[i * PROF_MAX_EVENTS + c->ev];
    for (size_t i = n; i-- > 1;)
        c->amb_incl[p->frames[i].parent] += c->amb_incl[i];
    return 0;
}

static void node_frame(const svg_ctx *c, uint32_t node, double x)
{
    const profile *p = c->p;
    size_t k = (size_t)node * PROF_MAX_EVENTS;
    if (p->incl[k + c->ev] * c->scale < SVG_MINW)
        return;
    char lb[1024];
    svg_frame fr = {prof_label(p, node, lb, sizeof lb), K_PATH, x, p->frames[node].depth, &p->incl[k], &p->self[k],
                    p->self_amb[k + c->ev], c->amb_incl[node]};
    put_frame(c, &fr);
    for (uint32_t i = c->kid_off[node]; i < c->kid_off[node + 1]; i++) {
        uint32_t ch = c->kids[i];
        node_frame(c, ch, x);
        x += p->incl[(size_t)ch * PROF_MAX_EVENTS + c->ev] * c->scale;
    }
}

/* A callee of "all": a path root (node > 0) or an unattributed row. */
typedef struct top_item {
    double   w;
    uint32_t node;
    size_t   extra;
} top_item;

static int top_cmp(const void *a, const void *b)
{
    const top_item *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    if (!x->node != !y->node)
        return x->node ? -1 : 1;
    return x->node != y->node ? (x->node < y->node ? -1 : 1) : (x->extra > y->extra) - (x->extra < y->extra);
}

/* ---- the document ---- */

/* The script: label fitting, click-to-zoom, search (box, Ctrl-F, ?s=REGEX),
 * zoom from the URL (?x=PX&y=PX, like flamegraph.pl).  Sets data-ready on
 * the root element when it has run.  Original geometry is kept in data-ox
 * and data-ow of each rect. */
static const char svg_script[] =
    "\"use strict\";\n"
    "var W, XPAD, CHARW, frames, details, matched, unzoombtn, searchbox, zoomed = null;\n"
    "function rect(g) { return g.querySelector(\"rect\"); }\n"
    "function text(g) { return g.querySelector(\"text\"); }\n"
    "function init() {\n"
    "  var svg = document.documentElement;\n"
    "  W = +svg.getAttribute(\"width\"); XPAD = +svg.getAttribute(\"data-xpad\"); CHARW = +svg.getAttribute(\"data-charw\");\n"
    "  frames = document.getElementById(\"frames\"); details = document.getElementById(\"details\");\n"
    "  matched = document.getElementById(\"matched\"); unzoombtn = document.getElementById(\"unzoom\");\n"
    "  searchbox = document.getElementById(\"search\");\n"
    "  for (var g of frames.children) {\n"
    "    var r = rect(g);\n"
    "    g._name = g.querySelector(\"title\").textContent.split(\"\\n\")[0];\n"
    "    r.setAttribute(\"data-ox\", r.getAttribute(\"x\")); r.setAttribute(\"data-ow\", r.getAttribute(\"width\"));\n"
    "    r.setAttribute(\"data-fill\", r.getAttribute(\"fill\"));\n"
    "    fit(g, +r.getAttribute(\"width\"));\n"
    "  }\n"
    "  frames.addEventListener(\"click\", function (e) { var g = e.target.closest(\"g.f\"); if (g) zoom(g); });\n"
    "  frames.addEventListener(\"mouseover\", function (e) {\n"
    "    var g = e.target.closest(\"g.f\");\n"
    "    if (g) details.textContent = g.querySelector(\"title\").textContent.split(\"\\n\").join(\"  |  \");\n"
    "  });\n"
    "  frames.addEventListener(\"mouseout\", function () { details.textContent = \" \"; });\n"
    "  unzoombtn.addEventListener(\"click\", unzoom);\n"
    "  document.getElementById(\"searchbtn\").addEventListener(\"click\", function () {\n"
    "    if (searchbox) { searchbox.focus(); return; }\n"
    "    var s = prompt(\"Search (regular expression)\", \"\"); if (s !== null) search(s);\n"
    "  });\n"
    "  if (searchbox) searchbox.addEventListener(\"input\", function () { search(searchbox.value); });\n"
    "  document.addEventListener(\"keydown\", function (e) {\n"
    "    if ((e.ctrlKey || e.metaKey) && e.key === \"f\") { e.preventDefault(); document.getElementById(\"searchbtn\")"
    ".dispatchEvent(new Event(\"click\")); }\n"
    "    else if (e.key === \"Escape\") { unzoom(); if (searchbox) { searchbox.value = \"\"; } search(\"\"); }\n"
    "  });\n"
    "  var q = new URLSearchParams(document.location.search);\n"
    "  if (q.get(\"s\")) { if (searchbox) searchbox.value = q.get(\"s\"); search(q.get(\"s\")); }\n"
    "  if (q.get(\"x\") !== null && q.get(\"y\") !== null) {\n"
    "    var qx = +q.get(\"x\"), qy = +q.get(\"y\");\n"
    "    for (var g of frames.children) {\n"
    "      var r = rect(g), x = +r.getAttribute(\"data-ox\"), y = +r.getAttribute(\"y\");\n"
    "      if (qx >= x && qx < x + +r.getAttribute(\"data-ow\") && qy >= y && qy < y + +r.getAttribute(\"height\")) { zoom(g); break; }\n"
    "    }\n"
    "  }\n"
    "  svg.setAttribute(\"data-ready\", \"1\");\n"
    "}\n"
    "function fit(g, w) {\n"
    "  var n = Math.floor((w - 6) / CHARW), s = g._name;\n"
    "  text(g).textContent = n < 3 ? \"\" : s.length <= n ? s : s.slice(0, n - 2) + \"..\";\n"
    "}\n"
    "function place(g, x, w) {\n"
    "  var r = rect(g);\n"
    "  r.setAttribute(\"x\", x.toFixed(3)); r.setAttribute(\"width\", w.toFixed(3));\n"
    "  text(g).setAttribute(\"x\", (x + 3).toFixed(3)); fit(g, w);\n"
    "}\n"
    "function zoom(z) {\n"
    "  var zr = rect(z), ox = +zr.getAttribute(\"data-ox\"), ow = +zr.getAttribute(\"data-ow\"), oy = +zr.getAttribute(\"y\");\n"
    "  /* x and width are printed to 3 decimals: an edge may be off by 0.002 */\n"
    "  var full = W - 2 * XPAD, ratio = full / ow, eps = 1e-2;\n"
    "  zoomed = z; unzoombtn.classList.remove(\"hide\");\n"
    "  for (var g of frames.children) {\n"
    "    var r = rect(g), x = +r.getAttribute(\"data-ox\"), w = +r.getAttribute(\"data-ow\"), y = +r.getAttribute(\"y\");\n"
    "    g.classList.remove(\"hide\"); g.classList.remove(\"parent\");\n"
    "    if (y > oy) {\n"
    "      if (x <= ox + eps && x + w >= ox + ow - eps) { g.classList.add(\"parent\"); place(g, XPAD, full); }\n"
    "      else g.classList.add(\"hide\");\n"
    "    } else if (x >= ox - eps && x + w <= ox + ow + eps) place(g, XPAD + (x - ox) * ratio, w * ratio);\n"
    "    else g.classList.add(\"hide\");\n"
    "  }\n"
    "}\n"
    "function unzoom() {\n"
    "  zoomed = null; unzoombtn.classList.add(\"hide\");\n"
    "  for (var g of frames.children) {\n"
    "    var r = rect(g);\n"
    "    g.classList.remove(\"hide\"); g.classList.remove(\"parent\");\n"
    "    place(g, +r.getAttribute(\"data-ox\"), +r.getAttribute(\"data-ow\"));\n"
    "  }\n"
    "}\n"
    "function search(s) {\n"
    "  var re = null;\n"
    "  if (s) { try { re = new RegExp(s); } catch (e) { matched.textContent = \"bad regular expression\"; return; } }\n"
    "  var hits = [];\n"
    "  for (var g of frames.children) {\n"
    "    var r = rect(g);\n"
    "    if (re && re.test(g._name)) { r.setAttribute(\"fill\", \"rgb(230,0,230)\"); hits.push([+r.getAttribute(\"data-ox\"), +r.getAttribute(\"data-ow\")]); }\n"
    "    else r.setAttribute(\"fill\", r.getAttribute(\"data-fill\"));\n"
    "  }\n"
    "  if (!re) { matched.textContent = \" \"; return; }\n"
    "  /* frames nest or are disjoint: count each outermost hit once */\n"
    "  hits.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });\n"
    "  var sum = 0, end = -1;\n"
    "  /* x and width are printed to 3 decimals: adjacent frames may overlap by 0.002 */\n"
    "  for (var h of hits) if (h[0] >= end - 1e-2) { sum += h[1]; end = h[0] + h[1]; }\n"
    "  matched.textContent = \"Matched: \" + (100 * sum / (W - 2 * XPAD)).toFixed(1) + \"%\";\n"
    "}\n";

static const char svg_style[] =
    "text { font-family: monospace; font-size: 12px; fill: #000; }\n"
    "#frames text { pointer-events: none; }\n"
    "#frames g { cursor: pointer; }\n"
    "#frames g:hover rect { stroke: #000; stroke-width: 0.5; }\n"
    ".title { font-size: 17px; text-anchor: middle; }\n"
    ".btn { fill: #0645ad; cursor: pointer; }\n"
    ".hide { display: none; }\n"
    ".parent { opacity: 0.5; }\n"
    "#header text { white-space: pre; }\n";

/* The report header as lines (out_header's text, without a lead). */
static char *header_text(const profile *p)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m)
        return NULL;
    out_header(p, m, "");
    if (fclose(m) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static void put_legend(FILE *f, double x, double y, int kind, const char *label)
{
    svg_frame fr = {label, kind, 0, 0, NULL, NULL, 0, 0};
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"", x, y - 10);
    put_fill(f, &fr);
    fprintf(f, "\"/><text x=\"%.0f\" y=\"%.0f\">", x + 16, y);
    xml_put(f, label, SIZE_MAX);
    fputs("</text>\n", f);
}

void out_svg(const profile *p, FILE *f, const out_opts *o)
{
    svg_ctx c = {p, f, o->sort_ev < p->nev ? o->sort_ev : 0, 0, 0, NULL, NULL, NULL};
    double t = prof_total(p, c.ev);
    c.scale = t > 0 ? (SVG_W - 2 * SVG_XPAD) / t : 0;
    char *hdr = header_text(p);
    int nhdr = 0;
    for (const char *s = hdr; s && *s; s++)
        nhdr += *s == '\n';
    /* Rows: the deepest frame wide enough to draw. */
    uint32_t maxdepth = 1;
    for (size_t i = 1; i < p->nframes; i++)
        if (p->incl[i * PROF_MAX_EVENTS + c.ev] * c.scale >= SVG_MINW && p->frames[i].depth > maxdepth)
            maxdepth = p->frames[i].depth;
    double top = 30 + SVG_LINE * (nhdr + 1) + 14;   /* title, header lines, controls */
    double height = top + (maxdepth + 1) * SVG_ROW + 34;
    c.bottom = top + (maxdepth + 1) * SVG_ROW;

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
               "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" data-xpad=\"%.0f\" data-charw=\"%.3f\" onload=\"init()\">\n",
            SVG_W, height, SVG_W, height, SVG_XPAD, SVG_CHARW);
    fputs("<desc>icpp-resolve flame graph. ", f);
    xml_put(f, hdr ? hdr : "", SIZE_MAX);
    fputs("</desc>\n<style>\n", f);
    fputs(svg_style, f);
    fputs("</style>\n<script type=\"text/ecmascript\"><![CDATA[\n", f);
    fputs(svg_script, f);
    fputs("]]></script>\n", f);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", SVG_W, height);

    /* Title, header, controls. */
    const char *base = strrchr(p->binary, '/');
    fprintf(f, "<text class=\"title\" x=\"%.0f\" y=\"24\">Flame graph of ", SVG_W / 2);
    xml_put(f, base ? base + 1 : (p->binary[0] ? p->binary : "?"), 80);
    fputs(" (", f);
    xml_put(f, p->ev_names[c.ev], SIZE_MAX);
    fputs(")</text>\n<g id=\"header\">\n", f);
    size_t cols = (size_t)((SVG_W - 2 * SVG_XPAD) / SVG_CHARW);
    double y = 30 + SVG_LINE;
    for (char *line = hdr, *nl; line && *line; line = nl + 1, y += SVG_LINE) {
        if (!(nl = strchr(line, '\n')))
            break;
        *nl = 0;
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", SVG_XPAD, y);
        if (xml_len(line) <= cols) {
            xml_put(f, line, SIZE_MAX);
        } else {
            xml_put(f, line, cols - 2);
            fputs("..", f);
        }
        fputs("</text>\n", f);
    }
    fputs("</g>\n", f);
    free(hdr);
    fprintf(f, "<text id=\"unzoom\" class=\"btn hide\" x=\"%.0f\" y=\"%.0f\">Reset zoom</text>\n", SVG_XPAD, y);
    put_legend(f, 130, y, K_PATH, "call path");
    put_legend(f, 250, y, K_MISSING, "[missing]");
    put_legend(f, 370, y, K_UNRESOLVED, "[unresolved]");
    fprintf(f, "<text x=\"500\" y=\"%.0f\">width = inclusive samples; click zooms</text>\n", y);
    fprintf(f, "<text id=\"searchbtn\" class=\"btn\" x=\"%.0f\" y=\"%.0f\">Search</text>\n", SVG_W - SVG_XPAD - 260, y);
    fprintf(f, "<foreignObject x=\"%.0f\" y=\"%.0f\" width=\"205\" height=\"22\">"
               "<input xmlns=\"http://www.w3.org/1999/xhtml\" id=\"search\" type=\"search\" "
               "placeholder=\"regex (Ctrl-F)\" style=\"width:195px;font:12px monospace\"/>"
               "</foreignObject>\n", SVG_W - SVG_XPAD - 205, y - 15);

    /* Frames. */
    fputs("<g id=\"frames\">\n", f);
    if (t > 0 && build_kids(&c) == 0) {
        double totals[PROF_MAX_EVENTS] = {0}, zero[PROF_MAX_EVENTS] = {0};
        for (uint32_t e = 0; e < p->nev; e++)
            totals[e] = prof_total(p, e);
        svg_frame all = {"all", K_ALL, SVG_XPAD, 0, totals, zero, 0, c.amb_incl[0]};
        put_frame(&c, &all);
        size_t nroots = c.kid_off[1] - c.kid_off[0], n = 0;
        top_item *items = malloc((nroots + p->nextra + 1) * sizeof *items);
        if (items) {
            for (uint32_t i = c.kid_off[0]; i < c.kid_off[1]; i++)
                items[n++] = (top_item){p->incl[(size_t)c.kids[i] * PROF_MAX_EVENTS + c.ev], c.kids[i], 0};
            for (size_t i = 0; i < p->nextra; i++)
                if (p->extra[i].w[c.ev] > 0)
                    items[n++] = (top_item){p->extra[i].w[c.ev], 0, i};
            qsort(items, n, sizeof *items, top_cmp);
            double x = SVG_XPAD;
            for (size_t i = 0; i < n; i++) {
                if (items[i].node) {
                    node_frame(&c, items[i].node, x);
                } else if (items[i].w * c.scale >= SVG_MINW) {
                    const prof_extra *ex = &p->extra[items[i].extra];
                    svg_frame fr = {ex->label, ex->kind == ICPP_RES_MISSING ? K_MISSING : K_UNRESOLVED, x, 1, ex->w,
                                    ex->w, 0, 0};
                    put_frame(&c, &fr);
                }
                x += items[i].w * c.scale;
            }
            free(items);
        }
    } else if (t <= 0) {
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">no samples of ", SVG_XPAD, c.bottom - 4);
        xml_put(f, p->ev_names[c.ev], SIZE_MAX);
        fputs("</text>\n", f);
    }
    fputs("</g>\n", f);
    fprintf(f, "<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n", SVG_XPAD, height - 12);
    fprintf(f, "<text id=\"matched\" x=\"%.0f\" y=\"%.0f\" style=\"text-anchor:end\"> </text>\n", SVG_W - SVG_XPAD,
            height - 12);
    fputs("</svg>\n", f);
    free(c.kid_off);
    free(c.kids);
    free(c.amb_incl);
}
