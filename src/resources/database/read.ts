import { typedReader } from "../kit/read.ts";
import { Database } from "./schema.ts";

// The Database as the other kinds read it (a Connection's or a restore's target, a clone's source).

const reader = typedReader(Database);

/** A Database object (from a cache or a watch event), parsed with its schema; undefined: none or invalid. */
export const readDatabase = reader.read;
