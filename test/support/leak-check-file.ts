// vitest's setupFiles: each test file's processes carry its path (MDS_TEST_FILE), so leak-check.ts can name the file
// whose server outlived the run.
import { beforeAll, expect } from "vitest";
import { fileMarker } from "./leak-check.ts";

beforeAll(() => {
  const file = expect.getState().testPath;
  if (file !== undefined) process.env[fileMarker] = file;
});
