#pragma once
// How the process gives freed heap memory back to the OS (glibc malloc). A server that parses a
// 30 MB body on one worker thread and the next on another must not keep each peak. By default
// glibc gives each busy thread an arena of its own, and the free space at the top of a thread's
// arena is returned only when a large block is freed there, never by malloc_trim: after a few
// large requests on different workers the process kept about 45 MB per worker (measured: six
// 2 MB bodies of digits, one after another, left 268 MB resident; with one arena, 44 MB, and 0
// after a trim). Requests on HTTP workers allocate little once prepared, and the engine's hot
// loops reuse their buffers, so one arena costs no measurable contention.
//
// Threads: configure_heap_for_serving() once, before the process starts other threads;
// release_freed_heap() from any thread.
namespace keel {

// One arena for every thread; allocations from 1 MiB up are their own mappings (returned on
// free), and the heap keeps at most 4 MiB of free memory at its top.
void configure_heap_for_serving();

// Returns free heap pages of every arena to the OS (malloc_trim). Costs a walk of the free lists:
// call it after freeing something large, not after every request.
void release_freed_heap();

}  // namespace keel
