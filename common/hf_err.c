/* Names and sentences for hf_err_t, generated from the one HF_ERR_MAP. */
#include "hf_err.h"

const char *hf_err_name(int err)
{
    switch (err) {
#define HF_ERR_NAME(name, code, str)                                                               \
    case code:                                                                                     \
        return "HF_ERR_" #name;
        HF_ERR_MAP(HF_ERR_NAME)
#undef HF_ERR_NAME
    }
    return "HF_ERR_UNKNOWN";
}

const char *hf_err_str(int err)
{
    switch (err) {
#define HF_ERR_STR(name, code, str)                                                                \
    case code:                                                                                     \
        return str;
        HF_ERR_MAP(HF_ERR_STR)
#undef HF_ERR_STR
    }
    return "unknown error";
}
