/* The perf probe's map layouts that user space reads too (perf_probe.cpp
 * watches the tick source at attach through ld_tick_state).  Included by
 * bpf/perf.bpf.c and by the loader: one definition, no mirror.  Plain
 * fixed-width types only (events.h). */
#pragma once

#include "events.h"

/* ld_tick_state, a per-CPU array of one: when the next sample is due, and the
 * ticks seen (user space measures the tick period from them at attach, to
 * check the tick runs through this hook at all and is at least as fast as the
 * asked rate). */
struct ld_tick_cpu {
	ld_u64 due_ns;
	ld_u64 first_ns;
	ld_u64 last_ns;
	ld_u64 ticks;
	/* While ld_calibrating: ticks of a task, those in which the two ways
	 * of telling user mode agreed, and those in user mode by the walk. */
	ld_u64 calib_ticks;
	ld_u64 calib_agree;
	ld_u64 calib_user;
};

/* ------------------------------------------------------ user-space frames
 * Maps the perf probe's Python walker (bpf/perf.bpf.c) and the loader share.
 * Offsets are bytes into CPython's structures for one process's interpreter,
 * filled by user space per process (agent/probes/python_frames.cpp: from
 * _Py_DebugOffsets in 3.13, from a table per minor version before). */
#define LD_PY_NONE 0xffffffffu   /* an offset this version does not have */
#define LD_PY_NAME_LEN 64        /* ld_py_code.name */
#define LD_PY_FILE_LEN 96        /* ld_py_code.file: the path's tail */
#define LD_PY_LINETABLE_LEN 512  /* ld_py_code.linetable: the first bytes of co_linetable */
#define LD_PY_MAX_THREADS 64     /* thread states looked at to find a thread's own */
#define LD_PY_FRAME_READ 104     /* bytes of a frame read at once: every field used is inside */
#define LD_PY_CODE_READ 144      /* bytes of a code object read at once, the same */
#define LD_PY_STR_READ 48        /* bytes of a str object's header read at once */

struct ld_py_offsets {
	ld_u32 runtime_interp_head;  /* _PyRuntime.interpreters.head */
	ld_u32 interp_threads_head;  /* PyInterpreterState.threads.head (3.10: tstate_head) */
	ld_u32 tstate_next;
	ld_u32 tstate_id;            /* native_thread_id (3.11+: the tid) or thread_id (3.10:
				      * pthread_self(), the thread's fs base on x86-64) */
	ld_u32 tstate_frame;         /* frame (3.10), cframe (3.11, 3.12), current_frame (3.13) */
	ld_u32 cframe_frame;         /* _PyCFrame.current_frame (3.11, 3.12), else LD_PY_NONE */
	ld_u32 frame_code;           /* f_code, f_executable (3.13) */
	ld_u32 frame_previous;       /* f_back (3.10), previous */
	ld_u32 frame_instr;          /* f_lasti (3.10, an int), prev_instr, instr_ptr (3.13) */
	ld_u32 frame_owner;          /* owner (a char) where C-stack shim frames exist (3.12+) */
	ld_u32 code_name;            /* co_qualname (3.11+) or co_name */
	ld_u32 code_filename;
	ld_u32 code_firstlineno;     /* an int */
	ld_u32 code_linetable;       /* a bytes object */
	ld_u32 code_adaptive;        /* co_code_adaptive (3.11+): the instructions, else LD_PY_NONE */
	ld_u32 object_type;          /* PyObject.ob_type */
	ld_u32 bytes_size;           /* PyVarObject.ob_size */
	ld_u32 bytes_data;           /* PyBytesObject.ob_sval */
	ld_u32 str_length;           /* PyASCIIObject.length */
	ld_u32 str_state;            /* PyASCIIObject.state: bit 6 ascii, bit 5 compact */
	ld_u32 str_ascii_data;       /* sizeof(PyASCIIObject): where a compact ASCII str's bytes are */
	ld_u32 str_utf8;             /* PyCompactUnicodeObject.utf8: a non-ASCII str's UTF-8, or 0 */
};

/* ld_py_procs: one per traced CPython process (key: tgid). */
struct ld_py_proc {
	ld_u64 runtime;       /* &_PyRuntime in the process */
	ld_u64 code_type;     /* &PyCode_Type in the process: a frame's code must be one (0: unchecked) */
	ld_u32 version;       /* 0x030b for 3.11 */
	ld_u32 id_is_fsbase;  /* tstate_id holds pthread_self() (3.10) */
	struct ld_py_offsets off;
};

/* ld_py_threads (key: tid): where a thread's thread state was found (0: it had
 * none when last looked for, at checked_ns, the misses-th time in a row). */
struct ld_py_thread {
	ld_u64 tstate;
	ld_u64 checked_ns;
	ld_u32 misses;
	ld_u32 _pad;
};

/* ld_py_codes: the names of a code object, read once when first seen. */
struct ld_py_code_key {
	ld_u32 tgid;
	ld_u32 _pad;
	ld_u64 code;
};
#define LD_PY_CODE_NOT_CODE 1    /* the frame's object was not a code object */
#define LD_PY_CODE_FILE_CUT 2    /* file holds the path's last LD_PY_FILE_LEN - 1 bytes */
#define LD_PY_CODE_NAME_UNREAD 4 /* the name could not be read (not ASCII nor UTF-8 cached) */
struct ld_py_code {
	ld_s32 firstlineno;
	ld_u16 linetable_len;   /* bytes kept in linetable */
	ld_u16 flags;           /* LD_PY_CODE_* */
	char name[LD_PY_NAME_LEN];
	char file[LD_PY_FILE_LEN];
	ld_u8 linetable[LD_PY_LINETABLE_LEN];
};

/* ld_py_stacks (key: the stack id, a hash of tgid and frames): one Python
 * stack, innermost frame first.  instr: the instruction executing, in code
 * units (2 bytes) from the start of the code; -1 unknown. */
struct ld_py_frame_ref {
	ld_u64 code;
	ld_s32 instr;
	ld_u32 _pad;
};
struct ld_py_stack {
	ld_u32 tgid;
	ld_u32 depth;
	ld_u32 flags;   /* LD_FRAMES_PY_TRUNCATED */
	ld_u32 _pad;
	struct ld_py_frame_ref frames[LD_PY_MAX_DEPTH];
};

/* ld_ustack_owners: which process a user stack id was taken in (the stack
 * table's ids are shared by every process). */
struct ld_ustack_owner {
	ld_u32 tgid;
	ld_s32 stack_id;
};
