import type { ResourceType } from "./types.ts";

// The version a client's code works in need not be the version it speaks on the wire, as inside the API server
// (an internal version, converted at the edge). A codec names, for each resource type, the version its requests use
// and converts objects on the way in (decode) and bodies on the way out (encode); the identity codec changes
// nothing. It must be lossless both ways for every object the server may return.

export interface WireCodec {
  /** The type as requests address it (its version on the wire). */
  onWire(type: ResourceType): ResourceType;
  /** An object the server returned, in the version the code works in. */
  decode<T>(type: ResourceType, obj: T): T;
  /** A body (whole object or merge patch) the code wrote, in the wire version. */
  encode<T extends object>(type: ResourceType, body: T): T;
}

export const identityCodec: WireCodec = {
  onWire: (type) => type,
  decode: (_type, obj) => obj,
  encode: (_type, body) => body,
};
