/* The in-order run's plain instructions, one after another, in C (vtasim/core/native.py builds and loads it).

   vta_run executes instructions [start, end) of a program that runs in program order, as the reference
   behavioral simulator does: each micro-op execution in loop order (iter_out, iter_in, micro-op), each on
   every lane, later executions seeing earlier ones' results. It stops at the first instruction it leaves to
   the Python units (returning its index): a micro-op load, a GEMM with a weight tile other than +-identity
   (BLAS does those better), a DMA the Python side
   classified as unusual, an index outside its buffer, an unknown ALU opcode, an empty loop. Python runs that
   one (and raises its fault, if any), then calls again from the next: this file decides nothing the units
   would decide differently, it only does the common cases without the interpreter.

   Each instruction is one row of `width` int64 values in `table` (native.py's native_table): the opcode, then
   a LOAD's or STORE's DMA entry or a GEMM's or ALU's fields, each read by the place ROW_<KIND>_<FIELD> gives it
   (native.py's row_layouts makes these from its own LOAD_ROW and STORE_ROW and the ISA's fields, as -D flags,
   with the opcodes, memory types and ALU operations).
   The DMA rows are the in-order path's own (inorder.py _load_entries, _store_entries): bounds were checked
   there, and anything they did not fit is "how = UNIT", which stops here. Lanes are int32 (ACC_WIDTH 32) and
   stored lanes one byte (OUT_WIDTH 8); native.py uses this file only for such configurations. */

#include <stdint.h>
#include <string.h>

/* Everything below is inlined into vta_run, so that each of its compiled versions (below) has its own */
#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

/* The codes come from the ISA tables and inorder.py's row kinds, as -D flags native.py writes when it builds
   this file (vtasm.isa: OPCODES, MEM_TYPES, ALU_OPS; inorder.py: UNIT, CONTIGUOUS, ROWS, PADDED): one
   declaration each, and a build without them fails rather than guesses. */
enum { OP_LOAD = VTA_OP_LOAD, OP_STORE = VTA_OP_STORE, OP_GEMM = VTA_OP_GEMM, OP_ALU = VTA_OP_ALU };
enum { HOW_UNIT = VTA_HOW_UNIT, HOW_CONTIGUOUS = VTA_HOW_CONTIGUOUS, HOW_ROWS = VTA_HOW_ROWS,
       HOW_PADDED = VTA_HOW_PADDED };
enum { MEM_WGT = VTA_MEM_WGT, MEM_INP = VTA_MEM_INP, MEM_ACC = VTA_MEM_ACC };
enum { ALU_MIN = VTA_ALU_MIN, ALU_MAX = VTA_ALU_MAX, ALU_ADD = VTA_ALU_ADD, ALU_SHR = VTA_ALU_SHR,
       ALU_MUL = VTA_ALU_MUL };

struct vta_ctx {
    const int64_t *table;
    int64_t width;
    uint8_t *dram;
    uint8_t *inp;
    uint8_t *wgt;
    uint8_t *acc; /* the accumulator's bytes; its lanes are int32 */
    int64_t acc_depth;
    int64_t lanes; /* int32 lanes of an accumulator row: BATCH * BLOCK_OUT */
    const int64_t *uop_dst;
    const int64_t *uop_src;
    const int64_t *uop_wgt;
    int64_t uop_depth;
    int64_t inp_loads; /* loads done here, for Python's generation counters */
    int64_t wgt_loads;
    int64_t batch;
    int64_t block; /* BLOCK_IN, equal to BLOCK_OUT (else 0: no GEMM that multiplies runs here) */
    int64_t inp_depth;
    int64_t wgt_depth;
};

INLINE int32_t wrap_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
INLINE int32_t wrap_mul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }

INLINE int32_t shift(int32_t a, int64_t y)
{
    /* y >= 0: arithmetic right shift by y's low bits; y < 0: left shift by -y's (alu.py's SHIFT_MASK) */
    if (y >= 0)
        return a >> (y & VTA_SHIFT_MASK);
    return (int32_t)((uint32_t)a << ((-y) & VTA_SHIFT_MASK));
}

/* One ALU operation on lanes, as an expression of the old value d and the operand v (int32). */
#define OP_MIN(d, v) ((d) < (v) ? (d) : (v))
#define OP_MAX(d, v) ((d) > (v) ? (d) : (v))
#define OP_ADD(d, v) wrap_add((d), (v))
#define OP_MUL(d, v) wrap_mul((d), (v))
#define OP_SHR(d, v) shift((d), (v))

/* Lanes of executions: dst[l] = OP(dst[l], src[l]) with src rows that are not dst rows (restrict lets the
   compiler vectorise), with src rows that may be (_self: lane by lane in order), and dst[l] = OP(dst[l], imm). */
#define LANE_FUNCTIONS(NAME, OP)                                                                              \
    INLINE void NAME##_rows(int32_t *restrict dst, const int32_t *restrict src, int64_t n)                    \
    {                                                                                                         \
        int64_t l;                                                                                            \
        for (l = 0; l < n; l++)                                                                               \
            dst[l] = OP(dst[l], src[l]);                                                                      \
    }                                                                                                         \
    INLINE void NAME##_rows16(int32_t *restrict dst, const int32_t *restrict src)                             \
    {                                                                                                         \
        int64_t l;                                                                                            \
        for (l = 0; l < 16; l++)                                                                              \
            dst[l] = OP(dst[l], src[l]);                                                                      \
    }                                                                                                         \
    INLINE void NAME##_self(int32_t *dst, int64_t n, const int32_t *src)                                      \
    {                                                                                                         \
        int64_t l;                                                                                            \
        for (l = 0; l < n; l++)                                                                               \
            dst[l] = OP(dst[l], src[l]);                                                                      \
    }                                                                                                         \
    INLINE void NAME##_imm(int32_t *restrict dst, int32_t imm, int64_t n)                                     \
    {                                                                                                         \
        int64_t l;                                                                                            \
        for (l = 0; l < n; l++)                                                                               \
            dst[l] = OP(dst[l], imm);                                                                         \
    }                                                                                                         \
    INLINE void NAME##_imm16(int32_t *restrict dst, int32_t imm)                                              \
    {                                                                                                         \
        int64_t l;                                                                                            \
        for (l = 0; l < 16; l++)                                                                              \
            dst[l] = OP(dst[l], imm);                                                                         \
    }

LANE_FUNCTIONS(alu_min, OP_MIN)
LANE_FUNCTIONS(alu_max, OP_MAX)
LANE_FUNCTIONS(alu_add, OP_ADD)
LANE_FUNCTIONS(alu_mul, OP_MUL)
LANE_FUNCTIONS(alu_shr, OP_SHR)

/* Every execution of an ALU instruction, in order, with one operation's lane functions. With one micro-op
   and rows one apart along the inner loop (dst, and src when there is one), the inner loop's executions
   touch consecutive rows: they run as one pass over their lanes in the same order (a plain loop, no
   restrict: where src rows are dst rows, each lane still sees exactly what the executions before wrote). */
#define ALU_OP(NAME)                                                                                          \
    if (e - b == 1 && dfi == 1 && (use_imm || sfi == 1)) {                                                    \
        for (i = 0; i < n_out; i++) {                                                                         \
            int32_t *dst = acc + (c->uop_dst[b] + i * dfo) * n;                                               \
            if (use_imm)                                                                                      \
                NAME##_imm(dst, imm, n * n_in);                                                               \
            else                                                                                              \
                NAME##_self(dst, n * n_in, acc + (c->uop_src[b] + i * sfo) * n);                              \
        }                                                                                                     \
        break;                                                                                                \
    }                                                                                                         \
    for (i = 0; i < n_out; i++)                                                                               \
        for (j = 0; j < n_in; j++)                                                                            \
            for (u = b; u < e; u++) {                                                                         \
                int32_t *dst = acc + (c->uop_dst[u] + i * dfo + j * dfi) * n;                                 \
                if (use_imm) {                                                                                \
                    if (n == 16)                                                                              \
                        NAME##_imm16(dst, imm);                                                               \
                    else                                                                                      \
                        NAME##_imm(dst, imm, n);                                                              \
                } else {                                                                                      \
                    const int32_t *src = acc + (c->uop_src[u] + i * sfo + j * sfi) * n;                       \
                    if (src == dst)                                                                           \
                        NAME##_self(dst, n, dst);                                                             \
                    else if (n == 16)                                                                         \
                        NAME##_rows16(dst, src);                                                              \
                    else                                                                                      \
                        NAME##_rows(dst, src, n);                                                             \
                }                                                                                             \
            }                                                                                                 \
    break;

/* Whether every execution's index base[u] + i * f_out + j * f_in (u in [b, e), i < n_out, j < n_in) lies
   in [0, depth): the factors are unsigned fields, so the extremes are at i = j = 0 and at the last i, j. */
INLINE int indices_fit(const int64_t *base, int64_t b, int64_t e, int64_t n_out, int64_t n_in,
                       int64_t f_out, int64_t f_in, int64_t depth)
{
    int64_t lo = base[b], hi = base[b], u, reach;
    for (u = b + 1; u < e; u++) {
        if (base[u] < lo) lo = base[u];
        if (base[u] > hi) hi = base[u];
    }
    reach = (n_out - 1) * f_out + (n_in - 1) * f_in;
    return lo >= 0 && f_out >= 0 && f_in >= 0 && hi + reach < depth;
}

INLINE int run_load(struct vta_ctx *c, const int64_t *r)
{
    int64_t how = r[ROW_LOAD_HOW], mtype = r[ROW_LOAD_MEM_TYPE], t0 = r[ROW_LOAD_START], t1 = r[ROW_LOAD_END];
    int64_t base = r[ROW_LOAD_BASE], ys = r[ROW_LOAD_ROWS], row = r[ROW_LOAD_ROW_BYTES], step = r[ROW_LOAD_STEP];
    int64_t xrow = r[ROW_LOAD_TILE_ROW_BYTES], yp0 = r[ROW_LOAD_PAD_ROW], xp0 = r[ROW_LOAD_PAD_BYTE], y;
    uint8_t *flat = mtype == MEM_INP ? c->inp : mtype == MEM_WGT ? c->wgt : mtype == MEM_ACC ? c->acc : 0;
    if (how == HOW_UNIT || flat == 0)
        return 0;
    if (how == HOW_CONTIGUOUS) {
        memcpy(flat + t0, c->dram + base, (size_t)(t1 - t0));
    } else if (how == HOW_ROWS) {
        for (y = 0; y < ys; y++)
            memcpy(flat + t0 + y * row, c->dram + base + y * step, (size_t)row);
    } else {
        memset(flat + t0, 0, (size_t)(t1 - t0));
        for (y = 0; y < ys; y++)
            memcpy(flat + t0 + (yp0 + y) * xrow + xp0, c->dram + base + y * step, (size_t)row);
    }
    if (mtype == MEM_INP)
        c->inp_loads++;
    else if (mtype == MEM_WGT)
        c->wgt_loads++;
    return 1;
}

INLINE int run_store(struct vta_ctx *c, const int64_t *r)
{
    /* the low byte of each int32 lane, as the unit's conversion keeps the low OUT_WIDTH bits */
    int64_t how = r[ROW_STORE_HOW], sram = r[ROW_STORE_START], end = r[ROW_STORE_END], base = r[ROW_STORE_BASE];
    int64_t ys = r[ROW_STORE_ROWS], row = r[ROW_STORE_ROW_BYTES], step = r[ROW_STORE_STEP], y, k;
    const int32_t *values = (const int32_t *)c->acc + sram * c->lanes;
    if (how == HOW_UNIT)
        return 0;
    if (how == HOW_CONTIGUOUS) {
        int64_t n = (end - sram) * c->lanes;
        uint8_t *out = c->dram + base;
        for (k = 0; k < n; k++)
            out[k] = (uint8_t)values[k];
        return 1;
    }
    for (y = 0; y < ys; y++) {
        uint8_t *out = c->dram + base + y * step;
        const int32_t *in = values + y * row;
        for (k = 0; k < row; k++)
            out[k] = (uint8_t)in[k];
    }
    return 1;
}

INLINE int run_reset(struct vta_ctx *c, const int64_t *r)
{
    int64_t b = r[ROW_GEMM_UOP_BGN], e = r[ROW_GEMM_UOP_END], n_out = r[ROW_GEMM_ITER_OUT], n_in = r[ROW_GEMM_ITER_IN];
    int64_t fo = r[ROW_GEMM_DST_FACTOR_OUT], fi = r[ROW_GEMM_DST_FACTOR_IN], i, j, u;
    int32_t *acc = (int32_t *)c->acc;
    if (!indices_fit(c->uop_dst, b, e, n_out, n_in, fo, fi, c->acc_depth))
        return 0;
    if (e - b == 1 && fi == 1) { /* consecutive rows along the inner loop: one zeroing each */
        for (i = 0; i < n_out; i++)
            memset(acc + (c->uop_dst[b] + i * fo) * c->lanes, 0, (size_t)(c->lanes * n_in) * 4);
        return 1;
    }
    for (i = 0; i < n_out; i++)
        for (j = 0; j < n_in; j++)
            for (u = b; u < e; u++) {
                int32_t *dst = acc + (c->uop_dst[u] + i * fo + j * fi) * c->lanes;
                if (c->lanes == 16)
                    memset(dst, 0, 64);  /* a constant size: inlined */
                else
                    memset(dst, 0, (size_t)c->lanes * 4);
            }
    return 1;
}

/* acc lanes += or -= int8 lanes (the int8 lanes are never the accumulator's: restrict) */
INLINE void add_int8(int32_t *restrict dst, const int8_t *restrict src, int64_t n)
{
    int64_t l;
    for (l = 0; l < n; l++)
        dst[l] = wrap_add(dst[l], src[l]);
}

INLINE void add_int8_16(int32_t *restrict dst, const int8_t *restrict src)
{
    int64_t l;
    for (l = 0; l < 16; l++)
        dst[l] = wrap_add(dst[l], src[l]);
}

INLINE void sub_int8(int32_t *restrict dst, const int8_t *restrict src, int64_t n)
{
    int64_t l;
    for (l = 0; l < n; l++)
        dst[l] = wrap_add(dst[l], -(int32_t)src[l]);
}

/* +1 when weight tile w is the identity, -1 its negation, 0 otherwise */
INLINE int identity_sign(const struct vta_ctx *c, int64_t w)
{
    const int8_t *tile = (const int8_t *)c->wgt + w * c->block * c->block;
    int64_t o, k;
    int sign = tile[0] == 1 ? 1 : tile[0] == -1 ? -1 : 0;
    if (sign == 0)
        return 0;
    for (o = 0; o < c->block; o++)
        for (k = 0; k < c->block; k++)
            if (tile[o * c->block + k] != (o == k ? sign : 0))
                return 0;
    return sign;
}

/* A GEMM whose every execution multiplies by a +-identity weight tile (how vtacc moves int8 data into the
   accumulator): acc[dst] += or -= inp[src], lane by lane; any other weight tile leaves it to Python. */
INLINE int run_gemm_identity(struct vta_ctx *c, const int64_t *r)
{
    int64_t b = r[ROW_GEMM_UOP_BGN], e = r[ROW_GEMM_UOP_END], n_out = r[ROW_GEMM_ITER_OUT], n_in = r[ROW_GEMM_ITER_IN];
    int64_t dfo = r[ROW_GEMM_DST_FACTOR_OUT], dfi = r[ROW_GEMM_DST_FACTOR_IN], sfo = r[ROW_GEMM_SRC_FACTOR_OUT];
    int64_t sfi = r[ROW_GEMM_SRC_FACTOR_IN], wfo = r[ROW_GEMM_WGT_FACTOR_OUT], wfi = r[ROW_GEMM_WGT_FACTOR_IN];
    int64_t i, j, u, n = c->batch * c->block, last = -1;
    int sign = 0;
    int32_t *acc = (int32_t *)c->acc;
    const int8_t *inp = (const int8_t *)c->inp;
    if (c->block == 0 || !indices_fit(c->uop_dst, b, e, n_out, n_in, dfo, dfi, c->acc_depth)
        || !indices_fit(c->uop_src, b, e, n_out, n_in, sfo, sfi, c->inp_depth)
        || !indices_fit(c->uop_wgt, b, e, n_out, n_in, wfo, wfi, c->wgt_depth))
        return 0;
    for (i = 0; i < n_out; i++) /* every tile first: nothing changes unless the whole instruction runs here */
        for (j = 0; j < n_in; j++)
            for (u = b; u < e; u++) {
                int64_t w = c->uop_wgt[u] + i * wfo + j * wfi;
                if (w != last) {
                    last = w;
                    if (identity_sign(c, w) == 0)
                        return 0;
                }
            }
    last = -1;
    if (e - b == 1 && dfi == 1 && sfi == 1 && wfi == 0) { /* consecutive rows, one weight tile: one pass each */
        for (i = 0; i < n_out; i++) {
            int32_t *dst = acc + (c->uop_dst[b] + i * dfo) * n;
            const int8_t *src = inp + (c->uop_src[b] + i * sfo) * n;
            if (identity_sign(c, c->uop_wgt[b] + i * wfo) > 0)
                add_int8(dst, src, n * n_in);
            else
                sub_int8(dst, src, n * n_in);
        }
        return 1;
    }
    for (i = 0; i < n_out; i++)
        for (j = 0; j < n_in; j++)
            for (u = b; u < e; u++) {
                int64_t w = c->uop_wgt[u] + i * wfo + j * wfi;
                int32_t *dst = acc + (c->uop_dst[u] + i * dfo + j * dfi) * n;
                const int8_t *src = inp + (c->uop_src[u] + i * sfo + j * sfi) * n;
                if (w != last) {
                    last = w;
                    sign = identity_sign(c, w);
                }
                if (sign > 0 && n == 16)
                    add_int8_16(dst, src);
                else if (sign > 0)
                    add_int8(dst, src, n);
                else
                    sub_int8(dst, src, n);
            }
    return 1;
}

INLINE int run_alu(struct vta_ctx *c, const int64_t *r)
{
    int64_t b = r[ROW_ALU_UOP_BGN], e = r[ROW_ALU_UOP_END], n_out = r[ROW_ALU_ITER_OUT], n_in = r[ROW_ALU_ITER_IN];
    int64_t dfo = r[ROW_ALU_DST_FACTOR_OUT], dfi = r[ROW_ALU_DST_FACTOR_IN], sfo = r[ROW_ALU_SRC_FACTOR_OUT];
    int64_t sfi = r[ROW_ALU_SRC_FACTOR_IN], op = r[ROW_ALU_ALU_OPCODE], use_imm = r[ROW_ALU_USE_IMM];
    int64_t i, j, u, n = c->lanes;
    int32_t imm = (int32_t)r[ROW_ALU_IMM];
    int32_t *acc = (int32_t *)c->acc;
    if (op < ALU_MIN || op > ALU_MUL || !indices_fit(c->uop_dst, b, e, n_out, n_in, dfo, dfi, c->acc_depth))
        return 0;
    if (!use_imm && !indices_fit(c->uop_src, b, e, n_out, n_in, sfo, sfi, c->acc_depth))
        return 0;
    switch (op) {
    case ALU_MIN: ALU_OP(alu_min)
    case ALU_MAX: ALU_OP(alu_max)
    case ALU_ADD: ALU_OP(alu_add)
    case ALU_MUL: ALU_OP(alu_mul)
    default: ALU_OP(alu_shr)
    }
    return 1;
}

/* On x86-64 the loop is compiled twice, for AVX2 and for the baseline, and the loader picks the one the
   processor runs (GCC's and Clang's function multiversioning): twice the lanes per instruction where AVX2 is,
   and a library that still runs where it is not (a cache directory shared by different machines). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(VTA_NO_CLONES)
__attribute__((target_clones("avx2", "default")))
#endif
int64_t vta_run(struct vta_ctx *c, int64_t start, int64_t end)
{
    int64_t k;
    for (k = start; k < end; k++) {
        const int64_t *r = c->table + k * c->width;
        int done = 0;
        switch (r[0]) {
        case OP_LOAD: done = run_load(c, r); break;
        case OP_STORE: done = run_store(c, r); break;
        case OP_GEMM:
            done = r[ROW_GEMM_UOP_END] > r[ROW_GEMM_UOP_BGN] && r[ROW_GEMM_UOP_END] <= c->uop_depth
                   && r[ROW_GEMM_UOP_BGN] >= 0 && r[ROW_GEMM_ITER_OUT] > 0 && r[ROW_GEMM_ITER_IN] > 0
                   && (r[ROW_GEMM_RESET] ? run_reset(c, r) : run_gemm_identity(c, r));
            break;
        case OP_ALU:
            done = r[ROW_ALU_UOP_END] > r[ROW_ALU_UOP_BGN] && r[ROW_ALU_UOP_END] <= c->uop_depth
                   && r[ROW_ALU_UOP_BGN] >= 0 && r[ROW_ALU_ITER_OUT] > 0 && r[ROW_ALU_ITER_IN] > 0 && run_alu(c, r);
            break;
        default: break;
        }
        if (!done)
            return k;
    }
    return end;
}


/* Where each field of struct vta_ctx lies, and its size: native.py compares them with its ctypes mirror when
   it loads the library, and falls back to Python if they differ (a drift would corrupt memory silently). */
#include <stddef.h>
#define VTA_FIELD(name) offsetof(struct vta_ctx, name)
void vta_ctx_layout(int64_t *out)
{
    const size_t fields[] = {VTA_FIELD(table), VTA_FIELD(width), VTA_FIELD(dram), VTA_FIELD(inp), VTA_FIELD(wgt),
                             VTA_FIELD(acc), VTA_FIELD(acc_depth), VTA_FIELD(lanes), VTA_FIELD(uop_dst),
                             VTA_FIELD(uop_src), VTA_FIELD(uop_wgt), VTA_FIELD(uop_depth), VTA_FIELD(inp_loads),
                             VTA_FIELD(wgt_loads), VTA_FIELD(batch), VTA_FIELD(block), VTA_FIELD(inp_depth),
                             VTA_FIELD(wgt_depth)};
    out[0] = (int64_t)sizeof(struct vta_ctx);
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++)
        out[k + 1] = (int64_t)fields[k];
}
