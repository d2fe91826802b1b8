/*
** modal_msgs.h: the protobuf messages lash sends to and reads from Modal
** (control plane `modal.client` and the task command router
** `modal.task_command_router`), as C structs with pb.h descriptor tables.
** Only the fields lash uses are declared; everything else a server sends is
** skipped as unknown. The .proto files under tests/modal_fake/modal_proto are the same
** subset in .proto form and test_pb checks the two agree field by field.
** Prefix modal_ (types modal_<Message>, enums MODAL_<...>); it needs only
** pb.h, so the transport and the codec stay below Modal.
*/
#ifndef lash_modal_msgs_h
#define lash_modal_msgs_h

#include "pb.h"

/* ---- enums ------------------------------------------------------------- */

enum {
  MODAL_OBJECT_CREATION_UNSPECIFIED = 0,
  MODAL_OBJECT_CREATION_CREATE_IF_MISSING = 1,
  MODAL_OBJECT_CREATION_EPHEMERAL = 5
};

enum {
  MODAL_STATUS_UNSPECIFIED = 0, MODAL_STATUS_SUCCESS = 1,
  MODAL_STATUS_FAILURE = 2, MODAL_STATUS_TERMINATED = 3,
  MODAL_STATUS_TIMEOUT = 4, MODAL_STATUS_INIT_FAILURE = 5,
  MODAL_STATUS_INTERNAL_FAILURE = 6, MODAL_STATUS_IDLE_TIMEOUT = 7,
  MODAL_STATUS_MEMORY_MANAGER_EVICTION = 8
};

enum { MODAL_NETWORK_OPEN = 1, MODAL_NETWORK_BLOCKED = 2,
       MODAL_NETWORK_ALLOWLIST = 3 };

enum { MODAL_REGISTRY_AUTH_PUBLIC = 3 };

/* router enums */
enum { MODAL_EXEC_OUT_DEVNULL = 0, MODAL_EXEC_OUT_PIPE = 1 };
enum { MODAL_STDIO_STDOUT = 0, MODAL_STDIO_STDERR = 1 };

/* ---- shared ------------------------------------------------------------ */

typedef struct modal_Empty { char unused_; } modal_Empty;

typedef struct modal_GenericResult {
  int32_t status;
  pb_str exception;
  int32_t exitcode;
  pb_str traceback;
  bool has_data;
  pb_str data;
  bool has_data_blob_id;
  pb_str data_blob_id;
} modal_GenericResult;

typedef struct modal_SandboxHandleMetadata {
  const modal_GenericResult *result;
  pb_str app_id;
} modal_SandboxHandleMetadata;

typedef struct modal_SandboxTag {
  pb_str tag_name, tag_value;
} modal_SandboxTag;

typedef struct modal_StringMap {
  pb_kv *contents; size_t contents_n;
} modal_StringMap;

typedef struct modal_NetworkAccess {
  int32_t network_access_type;
  pb_str *allowed_cidrs; size_t allowed_cidrs_n;
  pb_str *allowed_domains; size_t allowed_domains_n;
} modal_NetworkAccess;

typedef struct modal_GPUConfig {
  uint32_t count;
  pb_str gpu_type;               /* "A10G", "H100", ... (upper case) */
} modal_GPUConfig;

typedef struct modal_Resources {
  uint32_t memory_mb, milli_cpu;
  const modal_GPUConfig *gpu_config;
  uint32_t memory_mb_max, ephemeral_disk_mb, milli_cpu_max;
} modal_Resources;

/* A port of the sandbox Modal tunnels to the internet: TLS always, a raw
** TCP endpoint too when unencrypted. */
typedef struct modal_PortSpec { uint32_t port; bool unencrypted; } modal_PortSpec;
typedef struct modal_PortSpecs { modal_PortSpec *ports; size_t ports_n; } modal_PortSpecs;

typedef struct modal_Any {
  pb_str type_url, value;
} modal_Any;

typedef struct modal_RPCStatus {
  int32_t code;
  pb_str message;
  modal_Any *details; size_t details_n;
} modal_RPCStatus;

typedef struct modal_RPCRetryPolicy {
  float retry_after_secs;
} modal_RPCRetryPolicy;

/* ---- bootstrap --------------------------------------------------------- */

typedef struct modal_AuthTokenGetRequest { char unused_; } modal_AuthTokenGetRequest;
typedef struct modal_AuthTokenGetResponse { pb_str token; } modal_AuthTokenGetResponse;
typedef struct modal_ClientHelloResponse { pb_str warning; } modal_ClientHelloResponse;

typedef struct modal_EnvironmentGetOrCreateRequest {
  pb_str deployment_name;
  int32_t object_creation_type;
} modal_EnvironmentGetOrCreateRequest;

typedef struct modal_EnvironmentSettings {
  pb_str image_builder_version, webhook_suffix;
} modal_EnvironmentSettings;

typedef struct modal_EnvironmentMetadata {
  pb_str name;
  const modal_EnvironmentSettings *settings;
} modal_EnvironmentMetadata;

typedef struct modal_EnvironmentGetOrCreateResponse {
  pb_str environment_id;
  const modal_EnvironmentMetadata *metadata;
} modal_EnvironmentGetOrCreateResponse;

typedef struct modal_AppGetOrCreateRequest {
  pb_str app_name, environment_name;
  int32_t object_creation_type;
} modal_AppGetOrCreateRequest;

typedef struct modal_AppGetOrCreateResponse { pb_str app_id; } modal_AppGetOrCreateResponse;

/* ---- images ------------------------------------------------------------ */

typedef struct modal_BaseImage { pb_str image_id, docker_tag; } modal_BaseImage;

typedef struct modal_ImageRegistryConfig {
  int32_t registry_auth_type;
  pb_str secret_id;
} modal_ImageRegistryConfig;

typedef struct modal_Image {
  modal_BaseImage *base_images; size_t base_images_n;
  pb_str *dockerfile_commands; size_t dockerfile_commands_n;
  const modal_ImageRegistryConfig *image_registry_config;
} modal_Image;

typedef struct modal_ImageGetOrCreateRequest {
  const modal_Image *image;
  pb_str app_id;
  bool force_build;
  pb_str builder_version;
} modal_ImageGetOrCreateRequest;

typedef struct modal_ImageGetOrCreateResponse {
  pb_str image_id;
  const modal_GenericResult *result;
} modal_ImageGetOrCreateResponse;

typedef struct modal_TaskLogs {
  pb_str data;
  double timestamp;
  int32_t file_descriptor;
} modal_TaskLogs;

typedef struct modal_ImageJoinStreamingRequest {
  pb_str image_id;
  float timeout;
  pb_str last_entry_id;
  bool include_logs_for_finished;
} modal_ImageJoinStreamingRequest;

typedef struct modal_ImageJoinStreamingResponse {
  const modal_GenericResult *result;
  modal_TaskLogs *task_logs; size_t task_logs_n;
  pb_str entry_id;
  bool eof;
} modal_ImageJoinStreamingResponse;

/* ---- secrets ----------------------------------------------------------- */

typedef struct modal_SecretGetOrCreateRequest {
  pb_str deployment_name, environment_name;
  int32_t object_creation_type;
  pb_kv *env_dict; size_t env_dict_n;
  pb_str app_id;
  pb_str *required_keys; size_t required_keys_n;
} modal_SecretGetOrCreateRequest;

typedef struct modal_SecretGetOrCreateResponse { pb_str secret_id; } modal_SecretGetOrCreateResponse;

/* ---- sandboxes --------------------------------------------------------- */

typedef struct modal_Sandbox {
  pb_str *entrypoint_args; size_t entrypoint_args_n;
  pb_str image_id;
  pb_str *secret_ids; size_t secret_ids_n;
  const modal_Resources *resources;
  uint32_t timeout_secs;
  bool has_workdir;
  pb_str workdir;
  const modal_PortSpecs *open_ports;     /* oneof open_ports_oneof */
  const modal_NetworkAccess *network_access;
  bool has_name;
  pb_str name;
  bool has_idle_timeout_secs;
  uint32_t idle_timeout_secs;
} modal_Sandbox;

typedef struct modal_SandboxCreateRequest {
  pb_str app_id;
  const modal_Sandbox *definition;
  pb_str environment_name;
  modal_SandboxTag *tags; size_t tags_n;
} modal_SandboxCreateRequest;

typedef struct modal_SandboxCreateResponse {
  pb_str sandbox_id;
  const modal_SandboxHandleMetadata *metadata;
} modal_SandboxCreateResponse;

typedef struct modal_CommandRouterAccess { pb_str jwt, url; } modal_CommandRouterAccess;

typedef struct modal_SandboxCreateV2Request {
  pb_str app_id;
  const modal_Sandbox *definition;
  const modal_StringMap *ephemeral_secrets;
  modal_SandboxTag *tags; size_t tags_n;
} modal_SandboxCreateV2Request;

typedef struct modal_SandboxCreateV2Response {
  pb_str sandbox_id;
  pb_str task_id;
  const modal_SandboxHandleMetadata *metadata;
  const modal_CommandRouterAccess *command_router_access;
} modal_SandboxCreateV2Response;

typedef struct modal_SandboxGetTaskIdRequest {
  pb_str sandbox_id;
  bool has_timeout;
  float timeout;
  bool wait_until_ready;
} modal_SandboxGetTaskIdRequest;

typedef struct modal_SandboxGetTaskIdResponse {
  bool has_task_id;
  pb_str task_id;
  const modal_GenericResult *task_result;
} modal_SandboxGetTaskIdResponse;

typedef struct modal_TaskGetCommandRouterAccessRequest { pb_str task_id; } modal_TaskGetCommandRouterAccessRequest;
typedef struct modal_TaskGetCommandRouterAccessResponse { pb_str jwt, url; } modal_TaskGetCommandRouterAccessResponse;

typedef struct modal_SandboxGetCommandRouterAccessRequest {
  bool has_sandbox_id;           /* oneof target */
  pb_str sandbox_id;
  bool has_task_id;
  pb_str task_id;
} modal_SandboxGetCommandRouterAccessRequest;

typedef struct modal_SandboxGetCommandRouterAccessResponse {
  pb_str jwt, url, worker_ipv4_address;
} modal_SandboxGetCommandRouterAccessResponse;

typedef struct modal_SandboxWaitRequest {
  pb_str sandbox_id;
  float timeout;
} modal_SandboxWaitRequest;

typedef struct modal_SandboxWaitResponse {
  const modal_GenericResult *result;
  const modal_SandboxHandleMetadata *metadata;
} modal_SandboxWaitResponse;

typedef struct modal_SandboxGetTunnelsRequest {
  pb_str sandbox_id;
  float timeout;
} modal_SandboxGetTunnelsRequest;

typedef struct modal_TunnelData {
  pb_str host;
  uint32_t port;
  bool has_unencrypted_host;
  pb_str unencrypted_host;
  bool has_unencrypted_port;
  uint32_t unencrypted_port;
  uint32_t container_port;
} modal_TunnelData;

typedef struct modal_SandboxGetTunnelsResponse {
  const modal_GenericResult *result;
  modal_TunnelData *tunnels; size_t tunnels_n;
} modal_SandboxGetTunnelsResponse;

typedef struct modal_SandboxTerminateRequest { pb_str sandbox_id; } modal_SandboxTerminateRequest;
typedef struct modal_SandboxTerminateResponse {
  const modal_GenericResult *existing_result;
} modal_SandboxTerminateResponse;

typedef struct modal_SandboxTagsSetRequest {
  pb_str environment_name, sandbox_id;
  modal_SandboxTag *tags; size_t tags_n;
} modal_SandboxTagsSetRequest;

typedef struct modal_SandboxTagsGetRequest { pb_str sandbox_id; } modal_SandboxTagsGetRequest;
typedef struct modal_SandboxTagsGetResponse {
  modal_SandboxTag *tags; size_t tags_n;
} modal_SandboxTagsGetResponse;

typedef struct modal_TaskInfo {
  pb_str id;
  double started_at, finished_at;
  const modal_GenericResult *result;
} modal_TaskInfo;

typedef struct modal_SandboxInfo {
  pb_str id;
  double created_at;
  const modal_TaskInfo *task_info;
  pb_str app_id;
  modal_SandboxTag *tags; size_t tags_n;
  uint32_t timeout_secs;
} modal_SandboxInfo;

typedef struct modal_SandboxListRequest {   /* also SandboxListV2 */
  pb_str app_id;
  double before_timestamp;
  pb_str environment_name;
  bool include_finished;
  modal_SandboxTag *tags; size_t tags_n;
} modal_SandboxListRequest;

typedef struct modal_SandboxListResponse {
  modal_SandboxInfo *sandboxes; size_t sandboxes_n;
} modal_SandboxListResponse;

typedef struct modal_SandboxSnapshotFsRequest {
  pb_str sandbox_id;
  float timeout;
} modal_SandboxSnapshotFsRequest;

typedef struct modal_SandboxSnapshotFsResponse {
  pb_str image_id;
  const modal_GenericResult *result;
} modal_SandboxSnapshotFsResponse;

/* ---- task command router ------------------------------------------------ */

typedef struct modal_TaskSnapshotFilesystemRequest {
  pb_str task_id, snapshot_id;
  bool has_ttl_seconds;
  int64_t ttl_seconds;           /* -1: the image never expires */
} modal_TaskSnapshotFilesystemRequest;

typedef struct modal_TaskSnapshotFilesystemResponse { pb_str image_id; } modal_TaskSnapshotFilesystemResponse;

typedef struct modal_TaskExecStartRequest {
  pb_str task_id, exec_id;
  pb_str *command_args; size_t command_args_n;
  int32_t stdout_config, stderr_config;
  bool has_timeout_secs;
  uint32_t timeout_secs;
  bool has_workdir;
  pb_str workdir;
  pb_str *secret_ids; size_t secret_ids_n;
  pb_kv *env; size_t env_n;
} modal_TaskExecStartRequest;

typedef struct modal_TaskExecStdioReadRequest {
  pb_str task_id, exec_id;
  uint64_t offset;
  int32_t file_descriptor;
} modal_TaskExecStdioReadRequest;

typedef struct modal_TaskExecStdioReadResponse { pb_str data; } modal_TaskExecStdioReadResponse;

typedef struct modal_TaskExecWaitRequest { pb_str task_id, exec_id; } modal_TaskExecWaitRequest;

typedef struct modal_TaskExecWaitResponse {   /* also TaskExecPollResponse */
  bool has_code;                 /* oneof exit_status */
  int32_t code;
  bool has_signal;
  int32_t signal;
} modal_TaskExecWaitResponse;

typedef struct modal_TaskExecStdinWriteRequest {
  pb_str task_id, exec_id;
  uint64_t offset;
  pb_str data;
  bool eof;
} modal_TaskExecStdinWriteRequest;

/* ---- descriptors -------------------------------------------------------- */

#define MODAL_MSGS(X)                                                  \
  X(Empty) X(GenericResult) X(SandboxHandleMetadata) X(SandboxTag)       \
  X(StringMap) X(NetworkAccess) X(GPUConfig) X(Resources) X(PortSpec)   \
  X(PortSpecs)                                                           \
  X(Any)                                                                 \
  X(RPCStatus) X(RPCRetryPolicy) X(AuthTokenGetRequest)                  \
  X(AuthTokenGetResponse) X(ClientHelloResponse)                         \
  X(EnvironmentGetOrCreateRequest) X(EnvironmentSettings)                \
  X(EnvironmentMetadata) X(EnvironmentGetOrCreateResponse)               \
  X(AppGetOrCreateRequest) X(AppGetOrCreateResponse) X(BaseImage)        \
  X(ImageRegistryConfig) X(Image) X(ImageGetOrCreateRequest)             \
  X(ImageGetOrCreateResponse) X(TaskLogs) X(ImageJoinStreamingRequest)   \
  X(ImageJoinStreamingResponse) X(SecretGetOrCreateRequest)              \
  X(SecretGetOrCreateResponse) X(Sandbox) X(SandboxCreateRequest)        \
  X(SandboxCreateResponse) X(CommandRouterAccess)                        \
  X(SandboxCreateV2Request) X(SandboxCreateV2Response)                   \
  X(SandboxGetTaskIdRequest) X(SandboxGetTaskIdResponse)                 \
  X(TaskGetCommandRouterAccessRequest)                                   \
  X(TaskGetCommandRouterAccessResponse)                                  \
  X(SandboxGetCommandRouterAccessRequest)                                \
  X(SandboxGetCommandRouterAccessResponse) X(SandboxWaitRequest)         \
  X(SandboxWaitResponse) X(SandboxGetTunnelsRequest) X(TunnelData)      \
  X(SandboxGetTunnelsResponse) X(SandboxTerminateRequest)                \
  X(SandboxTerminateResponse) X(SandboxTagsSetRequest)                   \
  X(SandboxTagsGetRequest) X(SandboxTagsGetResponse)                     \
  X(TaskInfo) X(SandboxInfo) X(SandboxListRequest) X(SandboxListResponse) \
  X(SandboxSnapshotFsRequest) X(SandboxSnapshotFsResponse)               \
  X(TaskSnapshotFilesystemRequest) X(TaskSnapshotFilesystemResponse)     \
  X(TaskExecStartRequest) X(TaskExecStartResponse)                       \
  X(TaskExecStdioReadRequest) X(TaskExecStdioReadResponse)               \
  X(TaskExecWaitRequest) X(TaskExecWaitResponse) X(TaskExecPollRequest)  \
  X(TaskExecPollResponse) X(TaskExecStdinWriteRequest)                   \
  X(TaskExecStdinWriteResponse)

/* Messages that share another's struct. */
typedef modal_Empty modal_TaskExecStartResponse;
typedef modal_Empty modal_TaskExecStdinWriteResponse;
typedef modal_TaskExecWaitRequest modal_TaskExecPollRequest;
typedef modal_TaskExecWaitResponse modal_TaskExecPollResponse;

#define MODAL_DECLARE_DESC(name) extern const pb_msgdesc modal_##name##_desc;
MODAL_MSGS(MODAL_DECLARE_DESC)
#undef MODAL_DECLARE_DESC

/* Every descriptor above, NULL-terminated (for tests, fuzzing, logging). */
extern const pb_msgdesc *const modal_all_descs[];
/* Find a descriptor by full proto name ("modal.client.Sandbox"). */
const pb_msgdesc *modal_desc_find(const char *full_name);

#endif
