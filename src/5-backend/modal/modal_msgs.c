/*
** modal_msgs.c: descriptor tables for the Modal messages in modal_msgs.h.
** Each table lists fields in field-number order; the numbers and types are
** Modal's (modal_proto/api.proto, modal_proto/task_command_router.proto).
** Prefix modal_ (modal_<Message>_desc tables, modal_all_descs,
** modal_desc_find); data over pb.h, no calls into the client.
*/
#include "modal_msgs.h"

#include <stddef.h>
#include <string.h>

#define MC "modal.client."
#define TCR "modal.task_command_router."

/* A message with no fields lash uses. */
#define EMPTY_DESC(cname, full)                                         \
  const pb_msgdesc modal_##cname##_desc = { full, sizeof(modal_Empty), 0, 0, NULL };

EMPTY_DESC(Empty, "google.protobuf.Empty")
EMPTY_DESC(AuthTokenGetRequest, MC "AuthTokenGetRequest")
EMPTY_DESC(TaskExecStartResponse, TCR "TaskExecStartResponse")
EMPTY_DESC(TaskExecStdinWriteResponse, TCR "TaskExecStdinWriteResponse")

#define DESC(cname, full, table) \
  const pb_msgdesc modal_##cname##_desc = PB_DESC(modal_##cname, full, table, 0);

/* ---- shared ---- */

static const pb_field GenericResult_f[] = {
  PB_F(modal_GenericResult, 1, status, PB_ENUM),
  PB_F(modal_GenericResult, 2, exception, PB_STRING),
  PB_F(modal_GenericResult, 3, exitcode, PB_INT32),
  PB_F(modal_GenericResult, 4, traceback, PB_STRING),
  PB_ONEOF(modal_GenericResult, 5, data, PB_BYTES, 1),
  PB_ONEOF(modal_GenericResult, 10, data_blob_id, PB_STRING, 1),
};
DESC(GenericResult, MC "GenericResult", GenericResult_f)

static const pb_field SandboxHandleMetadata_f[] = {
  PB_MSGF(modal_SandboxHandleMetadata, 1, result, &modal_GenericResult_desc),
  PB_F(modal_SandboxHandleMetadata, 2, app_id, PB_STRING),
};
DESC(SandboxHandleMetadata, MC "SandboxHandleMetadata", SandboxHandleMetadata_f)

static const pb_field SandboxTag_f[] = {
  PB_F(modal_SandboxTag, 1, tag_name, PB_STRING),
  PB_F(modal_SandboxTag, 2, tag_value, PB_STRING),
};
DESC(SandboxTag, MC "SandboxTag", SandboxTag_f)

static const pb_field StringMap_f[] = {
  PB_MAP(modal_StringMap, 1, contents),
};
DESC(StringMap, MC "StringMap", StringMap_f)

static const pb_field NetworkAccess_f[] = {
  PB_F(modal_NetworkAccess, 1, network_access_type, PB_ENUM),
  PB_REP(modal_NetworkAccess, 2, allowed_cidrs, PB_STRING),
  PB_REP(modal_NetworkAccess, 3, allowed_domains, PB_STRING),
};
DESC(NetworkAccess, MC "NetworkAccess", NetworkAccess_f)

static const pb_field GPUConfig_f[] = {
  PB_F(modal_GPUConfig, 2, count, PB_UINT32),
  PB_F(modal_GPUConfig, 4, gpu_type, PB_STRING),
};
DESC(GPUConfig, MC "GPUConfig", GPUConfig_f)

static const pb_field Resources_f[] = {
  PB_F(modal_Resources, 2, memory_mb, PB_UINT32),
  PB_F(modal_Resources, 3, milli_cpu, PB_UINT32),
  PB_MSGF(modal_Resources, 4, gpu_config, &modal_GPUConfig_desc),
  PB_F(modal_Resources, 5, memory_mb_max, PB_UINT32),
  PB_F(modal_Resources, 6, ephemeral_disk_mb, PB_UINT32),
  PB_F(modal_Resources, 7, milli_cpu_max, PB_UINT32),
};
DESC(Resources, MC "Resources", Resources_f)

static const pb_field PortSpec_f[] = {
  PB_F(modal_PortSpec, 1, port, PB_UINT32),
  PB_F(modal_PortSpec, 2, unencrypted, PB_BOOL),
};
DESC(PortSpec, MC "PortSpec", PortSpec_f)

static const pb_field PortSpecs_f[] = {
  PB_REPMSG(modal_PortSpecs, 1, ports, &modal_PortSpec_desc),
};
DESC(PortSpecs, MC "PortSpecs", PortSpecs_f)

static const pb_field Any_f[] = {
  PB_F(modal_Any, 1, type_url, PB_STRING),
  PB_F(modal_Any, 2, value, PB_BYTES),
};
DESC(Any, "google.protobuf.Any", Any_f)

static const pb_field RPCStatus_f[] = {
  PB_F(modal_RPCStatus, 1, code, PB_INT32),
  PB_F(modal_RPCStatus, 2, message, PB_STRING),
  PB_REPMSG(modal_RPCStatus, 3, details, &modal_Any_desc),
};
DESC(RPCStatus, MC "RPCStatus", RPCStatus_f)

static const pb_field RPCRetryPolicy_f[] = {
  PB_F(modal_RPCRetryPolicy, 1, retry_after_secs, PB_FLOAT),
};
DESC(RPCRetryPolicy, MC "RPCRetryPolicy", RPCRetryPolicy_f)

/* ---- bootstrap ---- */

static const pb_field AuthTokenGetResponse_f[] = {
  PB_F(modal_AuthTokenGetResponse, 1, token, PB_STRING),
};
DESC(AuthTokenGetResponse, MC "AuthTokenGetResponse", AuthTokenGetResponse_f)

static const pb_field ClientHelloResponse_f[] = {
  PB_F(modal_ClientHelloResponse, 1, warning, PB_STRING),
};
DESC(ClientHelloResponse, MC "ClientHelloResponse", ClientHelloResponse_f)

static const pb_field EnvironmentGetOrCreateRequest_f[] = {
  PB_F(modal_EnvironmentGetOrCreateRequest, 1, deployment_name, PB_STRING),
  PB_F(modal_EnvironmentGetOrCreateRequest, 2, object_creation_type, PB_ENUM),
};
DESC(EnvironmentGetOrCreateRequest, MC "EnvironmentGetOrCreateRequest",
     EnvironmentGetOrCreateRequest_f)

static const pb_field EnvironmentSettings_f[] = {
  PB_F(modal_EnvironmentSettings, 1, image_builder_version, PB_STRING),
  PB_F(modal_EnvironmentSettings, 2, webhook_suffix, PB_STRING),
};
DESC(EnvironmentSettings, MC "EnvironmentSettings", EnvironmentSettings_f)

static const pb_field EnvironmentMetadata_f[] = {
  PB_F(modal_EnvironmentMetadata, 1, name, PB_STRING),
  PB_MSGF(modal_EnvironmentMetadata, 2, settings, &modal_EnvironmentSettings_desc),
};
DESC(EnvironmentMetadata, MC "EnvironmentMetadata", EnvironmentMetadata_f)

static const pb_field EnvironmentGetOrCreateResponse_f[] = {
  PB_F(modal_EnvironmentGetOrCreateResponse, 1, environment_id, PB_STRING),
  PB_MSGF(modal_EnvironmentGetOrCreateResponse, 2, metadata, &modal_EnvironmentMetadata_desc),
};
DESC(EnvironmentGetOrCreateResponse, MC "EnvironmentGetOrCreateResponse",
     EnvironmentGetOrCreateResponse_f)

static const pb_field AppGetOrCreateRequest_f[] = {
  PB_F(modal_AppGetOrCreateRequest, 1, app_name, PB_STRING),
  PB_F(modal_AppGetOrCreateRequest, 2, environment_name, PB_STRING),
  PB_F(modal_AppGetOrCreateRequest, 3, object_creation_type, PB_ENUM),
};
DESC(AppGetOrCreateRequest, MC "AppGetOrCreateRequest", AppGetOrCreateRequest_f)

static const pb_field AppGetOrCreateResponse_f[] = {
  PB_F(modal_AppGetOrCreateResponse, 1, app_id, PB_STRING),
};
DESC(AppGetOrCreateResponse, MC "AppGetOrCreateResponse", AppGetOrCreateResponse_f)

/* ---- images ---- */

static const pb_field BaseImage_f[] = {
  PB_F(modal_BaseImage, 1, image_id, PB_STRING),
  PB_F(modal_BaseImage, 2, docker_tag, PB_STRING),
};
DESC(BaseImage, MC "BaseImage", BaseImage_f)

static const pb_field ImageRegistryConfig_f[] = {
  PB_F(modal_ImageRegistryConfig, 1, registry_auth_type, PB_ENUM),
  PB_F(modal_ImageRegistryConfig, 2, secret_id, PB_STRING),
};
DESC(ImageRegistryConfig, MC "ImageRegistryConfig", ImageRegistryConfig_f)

static const pb_field Image_f[] = {
  PB_REPMSG(modal_Image, 5, base_images, &modal_BaseImage_desc),
  PB_REP(modal_Image, 6, dockerfile_commands, PB_STRING),
  PB_MSGF(modal_Image, 17, image_registry_config, &modal_ImageRegistryConfig_desc),
};
DESC(Image, MC "Image", Image_f)

static const pb_field ImageGetOrCreateRequest_f[] = {
  PB_MSGF(modal_ImageGetOrCreateRequest, 2, image, &modal_Image_desc),
  PB_F(modal_ImageGetOrCreateRequest, 4, app_id, PB_STRING),
  PB_F(modal_ImageGetOrCreateRequest, 7, force_build, PB_BOOL),
  PB_F(modal_ImageGetOrCreateRequest, 9, builder_version, PB_STRING),
};
DESC(ImageGetOrCreateRequest, MC "ImageGetOrCreateRequest", ImageGetOrCreateRequest_f)

static const pb_field ImageGetOrCreateResponse_f[] = {
  PB_F(modal_ImageGetOrCreateResponse, 1, image_id, PB_STRING),
  PB_MSGF(modal_ImageGetOrCreateResponse, 2, result, &modal_GenericResult_desc),
};
DESC(ImageGetOrCreateResponse, MC "ImageGetOrCreateResponse", ImageGetOrCreateResponse_f)

static const pb_field TaskLogs_f[] = {
  PB_F(modal_TaskLogs, 1, data, PB_STRING),
  PB_F(modal_TaskLogs, 7, timestamp, PB_DOUBLE),
  PB_F(modal_TaskLogs, 8, file_descriptor, PB_ENUM),
};
DESC(TaskLogs, MC "TaskLogs", TaskLogs_f)

static const pb_field ImageJoinStreamingRequest_f[] = {
  PB_F(modal_ImageJoinStreamingRequest, 1, image_id, PB_STRING),
  PB_F(modal_ImageJoinStreamingRequest, 2, timeout, PB_FLOAT),
  PB_F(modal_ImageJoinStreamingRequest, 3, last_entry_id, PB_STRING),
  PB_F(modal_ImageJoinStreamingRequest, 4, include_logs_for_finished, PB_BOOL),
};
DESC(ImageJoinStreamingRequest, MC "ImageJoinStreamingRequest", ImageJoinStreamingRequest_f)

static const pb_field ImageJoinStreamingResponse_f[] = {
  PB_MSGF(modal_ImageJoinStreamingResponse, 1, result, &modal_GenericResult_desc),
  PB_REPMSG(modal_ImageJoinStreamingResponse, 2, task_logs, &modal_TaskLogs_desc),
  PB_F(modal_ImageJoinStreamingResponse, 3, entry_id, PB_STRING),
  PB_F(modal_ImageJoinStreamingResponse, 4, eof, PB_BOOL),
};
DESC(ImageJoinStreamingResponse, MC "ImageJoinStreamingResponse", ImageJoinStreamingResponse_f)

/* ---- secrets ---- */

static const pb_field SecretGetOrCreateRequest_f[] = {
  PB_F(modal_SecretGetOrCreateRequest, 1, deployment_name, PB_STRING),
  PB_F(modal_SecretGetOrCreateRequest, 3, environment_name, PB_STRING),
  PB_F(modal_SecretGetOrCreateRequest, 4, object_creation_type, PB_ENUM),
  PB_MAP(modal_SecretGetOrCreateRequest, 5, env_dict),
  PB_F(modal_SecretGetOrCreateRequest, 6, app_id, PB_STRING),
  PB_REP(modal_SecretGetOrCreateRequest, 7, required_keys, PB_STRING),
};
DESC(SecretGetOrCreateRequest, MC "SecretGetOrCreateRequest", SecretGetOrCreateRequest_f)

static const pb_field SecretGetOrCreateResponse_f[] = {
  PB_F(modal_SecretGetOrCreateResponse, 1, secret_id, PB_STRING),
};
DESC(SecretGetOrCreateResponse, MC "SecretGetOrCreateResponse", SecretGetOrCreateResponse_f)

/* ---- sandboxes ---- */

static const pb_field Sandbox_f[] = {
  PB_REP(modal_Sandbox, 1, entrypoint_args, PB_STRING),
  PB_F(modal_Sandbox, 3, image_id, PB_STRING),
  PB_REP(modal_Sandbox, 4, secret_ids, PB_STRING),
  PB_MSGF(modal_Sandbox, 5, resources, &modal_Resources_desc),
  PB_F(modal_Sandbox, 7, timeout_secs, PB_UINT32),
  PB_OPT(modal_Sandbox, 8, workdir, PB_STRING),
  PB_MSG_ONEOF(modal_Sandbox, 20, open_ports, &modal_PortSpecs_desc, 1),
  PB_MSGF(modal_Sandbox, 22, network_access, &modal_NetworkAccess_desc),
  PB_OPT(modal_Sandbox, 30, name, PB_STRING),
  PB_OPT(modal_Sandbox, 33, idle_timeout_secs, PB_UINT32),
};
DESC(Sandbox, MC "Sandbox", Sandbox_f)

static const pb_field SandboxCreateRequest_f[] = {
  PB_F(modal_SandboxCreateRequest, 1, app_id, PB_STRING),
  PB_MSGF(modal_SandboxCreateRequest, 2, definition, &modal_Sandbox_desc),
  PB_F(modal_SandboxCreateRequest, 3, environment_name, PB_STRING),
  PB_REPMSG(modal_SandboxCreateRequest, 4, tags, &modal_SandboxTag_desc),
};
DESC(SandboxCreateRequest, MC "SandboxCreateRequest", SandboxCreateRequest_f)

static const pb_field SandboxCreateResponse_f[] = {
  PB_F(modal_SandboxCreateResponse, 1, sandbox_id, PB_STRING),
  PB_MSGF(modal_SandboxCreateResponse, 2, metadata, &modal_SandboxHandleMetadata_desc),
};
DESC(SandboxCreateResponse, MC "SandboxCreateResponse", SandboxCreateResponse_f)

static const pb_field CommandRouterAccess_f[] = {
  PB_F(modal_CommandRouterAccess, 1, jwt, PB_STRING),
  PB_F(modal_CommandRouterAccess, 2, url, PB_STRING),
};
DESC(CommandRouterAccess, MC "CommandRouterAccess", CommandRouterAccess_f)

static const pb_field SandboxCreateV2Request_f[] = {
  PB_F(modal_SandboxCreateV2Request, 1, app_id, PB_STRING),
  PB_MSGF(modal_SandboxCreateV2Request, 2, definition, &modal_Sandbox_desc),
  PB_MSGF(modal_SandboxCreateV2Request, 3, ephemeral_secrets, &modal_StringMap_desc),
  PB_REPMSG(modal_SandboxCreateV2Request, 4, tags, &modal_SandboxTag_desc),
};
DESC(SandboxCreateV2Request, MC "SandboxCreateV2Request", SandboxCreateV2Request_f)

static const pb_field SandboxCreateV2Response_f[] = {
  PB_F(modal_SandboxCreateV2Response, 1, sandbox_id, PB_STRING),
  PB_F(modal_SandboxCreateV2Response, 3, task_id, PB_STRING),
  PB_MSGF(modal_SandboxCreateV2Response, 4, metadata, &modal_SandboxHandleMetadata_desc),
  PB_MSGF(modal_SandboxCreateV2Response, 5, command_router_access, &modal_CommandRouterAccess_desc),
};
DESC(SandboxCreateV2Response, MC "SandboxCreateV2Response", SandboxCreateV2Response_f)

static const pb_field SandboxGetTaskIdRequest_f[] = {
  PB_F(modal_SandboxGetTaskIdRequest, 1, sandbox_id, PB_STRING),
  PB_OPT(modal_SandboxGetTaskIdRequest, 2, timeout, PB_FLOAT),
  PB_F(modal_SandboxGetTaskIdRequest, 3, wait_until_ready, PB_BOOL),
};
DESC(SandboxGetTaskIdRequest, MC "SandboxGetTaskIdRequest", SandboxGetTaskIdRequest_f)

static const pb_field SandboxGetTaskIdResponse_f[] = {
  PB_OPT(modal_SandboxGetTaskIdResponse, 1, task_id, PB_STRING),
  PB_MSGF(modal_SandboxGetTaskIdResponse, 2, task_result, &modal_GenericResult_desc),
};
DESC(SandboxGetTaskIdResponse, MC "SandboxGetTaskIdResponse", SandboxGetTaskIdResponse_f)

static const pb_field TaskGetCommandRouterAccessRequest_f[] = {
  PB_F(modal_TaskGetCommandRouterAccessRequest, 1, task_id, PB_STRING),
};
DESC(TaskGetCommandRouterAccessRequest, MC "TaskGetCommandRouterAccessRequest",
     TaskGetCommandRouterAccessRequest_f)

static const pb_field TaskGetCommandRouterAccessResponse_f[] = {
  PB_F(modal_TaskGetCommandRouterAccessResponse, 1, jwt, PB_STRING),
  PB_F(modal_TaskGetCommandRouterAccessResponse, 2, url, PB_STRING),
};
DESC(TaskGetCommandRouterAccessResponse, MC "TaskGetCommandRouterAccessResponse",
     TaskGetCommandRouterAccessResponse_f)

static const pb_field SandboxGetCommandRouterAccessRequest_f[] = {
  PB_ONEOF(modal_SandboxGetCommandRouterAccessRequest, 1, sandbox_id, PB_STRING, 1),
  PB_ONEOF(modal_SandboxGetCommandRouterAccessRequest, 2, task_id, PB_STRING, 1),
};
DESC(SandboxGetCommandRouterAccessRequest, MC "SandboxGetCommandRouterAccessRequest",
     SandboxGetCommandRouterAccessRequest_f)

static const pb_field SandboxGetCommandRouterAccessResponse_f[] = {
  PB_F(modal_SandboxGetCommandRouterAccessResponse, 1, jwt, PB_STRING),
  PB_F(modal_SandboxGetCommandRouterAccessResponse, 2, url, PB_STRING),
  PB_F(modal_SandboxGetCommandRouterAccessResponse, 3, worker_ipv4_address, PB_STRING),
};
DESC(SandboxGetCommandRouterAccessResponse, MC "SandboxGetCommandRouterAccessResponse",
     SandboxGetCommandRouterAccessResponse_f)

static const pb_field SandboxWaitRequest_f[] = {
  PB_F(modal_SandboxWaitRequest, 1, sandbox_id, PB_STRING),
  PB_F(modal_SandboxWaitRequest, 2, timeout, PB_FLOAT),
};
DESC(SandboxWaitRequest, MC "SandboxWaitRequest", SandboxWaitRequest_f)

static const pb_field SandboxWaitResponse_f[] = {
  PB_MSGF(modal_SandboxWaitResponse, 1, result, &modal_GenericResult_desc),
  PB_MSGF(modal_SandboxWaitResponse, 2, metadata, &modal_SandboxHandleMetadata_desc),
};
DESC(SandboxWaitResponse, MC "SandboxWaitResponse", SandboxWaitResponse_f)

static const pb_field SandboxGetTunnelsRequest_f[] = {
  PB_F(modal_SandboxGetTunnelsRequest, 1, sandbox_id, PB_STRING),
  PB_F(modal_SandboxGetTunnelsRequest, 2, timeout, PB_FLOAT),
};
DESC(SandboxGetTunnelsRequest, MC "SandboxGetTunnelsRequest", SandboxGetTunnelsRequest_f)

static const pb_field TunnelData_f[] = {
  PB_F(modal_TunnelData, 1, host, PB_STRING),
  PB_F(modal_TunnelData, 2, port, PB_UINT32),
  PB_OPT(modal_TunnelData, 3, unencrypted_host, PB_STRING),
  PB_OPT(modal_TunnelData, 4, unencrypted_port, PB_UINT32),
  PB_F(modal_TunnelData, 5, container_port, PB_UINT32),
};
DESC(TunnelData, MC "TunnelData", TunnelData_f)

static const pb_field SandboxGetTunnelsResponse_f[] = {
  PB_MSGF(modal_SandboxGetTunnelsResponse, 1, result, &modal_GenericResult_desc),
  PB_REPMSG(modal_SandboxGetTunnelsResponse, 2, tunnels, &modal_TunnelData_desc),
};
DESC(SandboxGetTunnelsResponse, MC "SandboxGetTunnelsResponse", SandboxGetTunnelsResponse_f)

static const pb_field SandboxTerminateRequest_f[] = {
  PB_F(modal_SandboxTerminateRequest, 1, sandbox_id, PB_STRING),
};
DESC(SandboxTerminateRequest, MC "SandboxTerminateRequest", SandboxTerminateRequest_f)

static const pb_field SandboxTerminateResponse_f[] = {
  PB_MSGF(modal_SandboxTerminateResponse, 1, existing_result, &modal_GenericResult_desc),
};
DESC(SandboxTerminateResponse, MC "SandboxTerminateResponse", SandboxTerminateResponse_f)

static const pb_field SandboxTagsSetRequest_f[] = {
  PB_F(modal_SandboxTagsSetRequest, 1, environment_name, PB_STRING),
  PB_F(modal_SandboxTagsSetRequest, 2, sandbox_id, PB_STRING),
  PB_REPMSG(modal_SandboxTagsSetRequest, 3, tags, &modal_SandboxTag_desc),
};
DESC(SandboxTagsSetRequest, MC "SandboxTagsSetRequest", SandboxTagsSetRequest_f)

static const pb_field SandboxTagsGetRequest_f[] = {
  PB_F(modal_SandboxTagsGetRequest, 1, sandbox_id, PB_STRING),
};
DESC(SandboxTagsGetRequest, MC "SandboxTagsGetRequest", SandboxTagsGetRequest_f)

static const pb_field SandboxTagsGetResponse_f[] = {
  PB_REPMSG(modal_SandboxTagsGetResponse, 1, tags, &modal_SandboxTag_desc),
};
DESC(SandboxTagsGetResponse, MC "SandboxTagsGetResponse", SandboxTagsGetResponse_f)

static const pb_field TaskInfo_f[] = {
  PB_F(modal_TaskInfo, 1, id, PB_STRING),
  PB_F(modal_TaskInfo, 2, started_at, PB_DOUBLE),
  PB_F(modal_TaskInfo, 3, finished_at, PB_DOUBLE),
  PB_MSGF(modal_TaskInfo, 4, result, &modal_GenericResult_desc),
};
DESC(TaskInfo, MC "TaskInfo", TaskInfo_f)

static const pb_field SandboxInfo_f[] = {
  PB_F(modal_SandboxInfo, 1, id, PB_STRING),
  PB_F(modal_SandboxInfo, 3, created_at, PB_DOUBLE),
  PB_MSGF(modal_SandboxInfo, 4, task_info, &modal_TaskInfo_desc),
  PB_F(modal_SandboxInfo, 5, app_id, PB_STRING),
  PB_REPMSG(modal_SandboxInfo, 6, tags, &modal_SandboxTag_desc),
  PB_F(modal_SandboxInfo, 11, timeout_secs, PB_UINT32),
};
DESC(SandboxInfo, MC "SandboxInfo", SandboxInfo_f)

static const pb_field SandboxListRequest_f[] = {
  PB_F(modal_SandboxListRequest, 1, app_id, PB_STRING),
  PB_F(modal_SandboxListRequest, 2, before_timestamp, PB_DOUBLE),
  PB_F(modal_SandboxListRequest, 3, environment_name, PB_STRING),
  PB_F(modal_SandboxListRequest, 4, include_finished, PB_BOOL),
  PB_REPMSG(modal_SandboxListRequest, 5, tags, &modal_SandboxTag_desc),
};
DESC(SandboxListRequest, MC "SandboxListRequest", SandboxListRequest_f)

static const pb_field SandboxListResponse_f[] = {
  PB_REPMSG(modal_SandboxListResponse, 1, sandboxes, &modal_SandboxInfo_desc),
};
DESC(SandboxListResponse, MC "SandboxListResponse", SandboxListResponse_f)

static const pb_field SandboxSnapshotFsRequest_f[] = {
  PB_F(modal_SandboxSnapshotFsRequest, 1, sandbox_id, PB_STRING),
  PB_F(modal_SandboxSnapshotFsRequest, 2, timeout, PB_FLOAT),
};
DESC(SandboxSnapshotFsRequest, MC "SandboxSnapshotFsRequest", SandboxSnapshotFsRequest_f)

static const pb_field SandboxSnapshotFsResponse_f[] = {
  PB_F(modal_SandboxSnapshotFsResponse, 1, image_id, PB_STRING),
  PB_MSGF(modal_SandboxSnapshotFsResponse, 2, result, &modal_GenericResult_desc),
};
DESC(SandboxSnapshotFsResponse, MC "SandboxSnapshotFsResponse", SandboxSnapshotFsResponse_f)

/* ---- task command router ---- */

static const pb_field TaskSnapshotFilesystemRequest_f[] = {
  PB_F(modal_TaskSnapshotFilesystemRequest, 1, task_id, PB_STRING),
  PB_F(modal_TaskSnapshotFilesystemRequest, 2, snapshot_id, PB_STRING),
  PB_OPT(modal_TaskSnapshotFilesystemRequest, 3, ttl_seconds, PB_INT64),
};
DESC(TaskSnapshotFilesystemRequest, TCR "TaskSnapshotFilesystemRequest",
     TaskSnapshotFilesystemRequest_f)

static const pb_field TaskSnapshotFilesystemResponse_f[] = {
  PB_F(modal_TaskSnapshotFilesystemResponse, 1, image_id, PB_STRING),
};
DESC(TaskSnapshotFilesystemResponse, TCR "TaskSnapshotFilesystemResponse",
     TaskSnapshotFilesystemResponse_f)

static const pb_field TaskExecStartRequest_f[] = {
  PB_F(modal_TaskExecStartRequest, 1, task_id, PB_STRING),
  PB_F(modal_TaskExecStartRequest, 2, exec_id, PB_STRING),
  PB_REP(modal_TaskExecStartRequest, 3, command_args, PB_STRING),
  PB_F(modal_TaskExecStartRequest, 4, stdout_config, PB_ENUM),
  PB_F(modal_TaskExecStartRequest, 5, stderr_config, PB_ENUM),
  PB_OPT(modal_TaskExecStartRequest, 6, timeout_secs, PB_UINT32),
  PB_OPT(modal_TaskExecStartRequest, 7, workdir, PB_STRING),
  PB_REP(modal_TaskExecStartRequest, 8, secret_ids, PB_STRING),
  PB_MAP(modal_TaskExecStartRequest, 12, env),
};
DESC(TaskExecStartRequest, TCR "TaskExecStartRequest", TaskExecStartRequest_f)

static const pb_field TaskExecStdioReadRequest_f[] = {
  PB_F(modal_TaskExecStdioReadRequest, 1, task_id, PB_STRING),
  PB_F(modal_TaskExecStdioReadRequest, 2, exec_id, PB_STRING),
  PB_F(modal_TaskExecStdioReadRequest, 3, offset, PB_UINT64),
  PB_F(modal_TaskExecStdioReadRequest, 4, file_descriptor, PB_ENUM),
};
DESC(TaskExecStdioReadRequest, TCR "TaskExecStdioReadRequest", TaskExecStdioReadRequest_f)

static const pb_field TaskExecStdioReadResponse_f[] = {
  PB_F(modal_TaskExecStdioReadResponse, 1, data, PB_BYTES),
};
DESC(TaskExecStdioReadResponse, TCR "TaskExecStdioReadResponse", TaskExecStdioReadResponse_f)

static const pb_field TaskExecWaitRequest_f[] = {
  PB_F(modal_TaskExecWaitRequest, 1, task_id, PB_STRING),
  PB_F(modal_TaskExecWaitRequest, 2, exec_id, PB_STRING),
};
DESC(TaskExecWaitRequest, TCR "TaskExecWaitRequest", TaskExecWaitRequest_f)
const pb_msgdesc modal_TaskExecPollRequest_desc =
  PB_DESC(modal_TaskExecPollRequest, TCR "TaskExecPollRequest", TaskExecWaitRequest_f, 0);

static const pb_field TaskExecWaitResponse_f[] = {
  PB_ONEOF(modal_TaskExecWaitResponse, 1, code, PB_INT32, 1),
  PB_ONEOF(modal_TaskExecWaitResponse, 2, signal, PB_INT32, 1),
};
DESC(TaskExecWaitResponse, TCR "TaskExecWaitResponse", TaskExecWaitResponse_f)
const pb_msgdesc modal_TaskExecPollResponse_desc =
  PB_DESC(modal_TaskExecPollResponse, TCR "TaskExecPollResponse", TaskExecWaitResponse_f, 0);

static const pb_field TaskExecStdinWriteRequest_f[] = {
  PB_F(modal_TaskExecStdinWriteRequest, 1, task_id, PB_STRING),
  PB_F(modal_TaskExecStdinWriteRequest, 2, exec_id, PB_STRING),
  PB_F(modal_TaskExecStdinWriteRequest, 3, offset, PB_UINT64),
  PB_F(modal_TaskExecStdinWriteRequest, 4, data, PB_BYTES),
  PB_F(modal_TaskExecStdinWriteRequest, 5, eof, PB_BOOL),
};
DESC(TaskExecStdinWriteRequest, TCR "TaskExecStdinWriteRequest", TaskExecStdinWriteRequest_f)

/* ---- registry ---- */

#define MODAL_DESC_ADDR(name) &modal_##name##_desc,
const pb_msgdesc *const modal_all_descs[] = { MODAL_MSGS(MODAL_DESC_ADDR) NULL };

const pb_msgdesc *modal_desc_find(const char *full_name) {
  for (size_t i = 0; modal_all_descs[i]; i++)
    if (!strcmp(modal_all_descs[i]->name, full_name)) return modal_all_descs[i];
  return NULL;
}
