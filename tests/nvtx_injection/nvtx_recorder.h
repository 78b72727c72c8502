/* The C interface of the NVTX recording injection library (tests/nvtx_injection), shared by the
 * library and the tests that read what it recorded.
 *
 * NVTX loads the library named by NVTX_INJECTION64_PATH at the first NVTX call of the process and
 * calls its InitializeInjectionNvtx2, which points every NVTX entry point the tests need at a function
 * that appends a record to a global list. The tests open the same library (dlopen returns the
 * instance NVTX loaded) and read the list through the functions below, found with dlsym. */
#ifndef CUDRV_TEST_NVTX_RECORDER_H
#define CUDRV_TEST_NVTX_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What an NVTX call recorded. */
enum cudrv_nvtx_record_kind {
  CUDRV_NVTX_PUSH = 1,             /* nvtxRangePushEx/A, nvtxDomainRangePushEx */
  CUDRV_NVTX_POP = 2,              /* nvtxRangePop, nvtxDomainRangePop */
  CUDRV_NVTX_START = 3,            /* nvtxRangeStartEx/A, nvtxDomainRangeStartEx; handle: the range id */
  CUDRV_NVTX_END = 4,              /* nvtxRangeEnd, nvtxDomainRangeEnd; handle: the range id */
  CUDRV_NVTX_MARK = 5,             /* nvtxMarkEx/A, nvtxDomainMarkEx */
  CUDRV_NVTX_DOMAIN_CREATE = 6,    /* nvtxDomainCreateA; message: the name, handle: the new domain */
  CUDRV_NVTX_REGISTER_STRING = 7,  /* nvtxDomainRegisterStringA; message: the text, handle: the string */
  CUDRV_NVTX_NAME_CATEGORY = 8,    /* nvtxNameCategoryA, nvtxDomainNameCategoryA; category: the id */
  CUDRV_NVTX_NAME_CU_DEVICE = 9,   /* nvtxNameCuDeviceA; handle: the CUdevice */
  CUDRV_NVTX_NAME_CU_CONTEXT = 10, /* nvtxNameCuContextA; handle: the CUcontext */
  CUDRV_NVTX_NAME_CU_STREAM = 11,  /* nvtxNameCuStreamA; handle: the CUstream */
  CUDRV_NVTX_NAME_CU_EVENT = 12    /* nvtxNameCuEventA; handle: the CUevent */
};

/* One recorded call. The strings belong to the library and stay valid until
 * cudrv_nvtx_recorder_clear. */
struct cudrv_nvtx_record {
  int kind;                /* a cudrv_nvtx_record_kind */
  const char* api;         /* the NVTX function called, e.g. "nvtxDomainRangePushEx" */
  uint64_t domain;         /* the nvtxDomainHandle_t; 0 for the global domain and the non-domain calls */
  const char* domain_name; /* the name the domain was created with; "" for the global domain */
  int has_message;         /* whether a message was passed (registered strings are resolved to their text) */
  const char* message;     /* the message or name ("" when none) */
  int message_type;        /* the nvtxMessageType_t the caller used (NVTX_MESSAGE_UNKNOWN when none) */
  uint32_t category;       /* the category (0 when none) */
  int color_type;          /* the nvtxColorType_t (NVTX_COLOR_UNKNOWN when none) */
  uint32_t color;          /* the ARGB colour */
  int payload_type;        /* the nvtxPayloadType_t (NVTX_PAYLOAD_UNKNOWN when none) */
  uint64_t payload;        /* the 8 bytes of the payload union */
  uint64_t handle;         /* the named object, range id or string handle, as an integer */
  int level;               /* push: the nesting level returned; pop: the level popped */
  uint64_t thread;         /* a number identifying the calling thread */
};

/* The number of records so far. */
size_t cudrv_nvtx_recorder_count(void);
/* Copies record index into *out; returns 0 when index is out of range. */
int cudrv_nvtx_recorder_get(size_t index, struct cudrv_nvtx_record* out);
/* Forgets the records (the domains and registered strings stay known). */
void cudrv_nvtx_recorder_clear(void);
/* How many times NVTX initialised the library (once per NVTX instance, i.e. per linked module). */
int cudrv_nvtx_recorder_initializations(void);

#ifdef __cplusplus
}
#endif

#endif /* CUDRV_TEST_NVTX_RECORDER_H */
