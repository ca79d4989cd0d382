import type { KindRegistration } from "../operator/kind.ts";
import { restoreRegistration, type RestoreSettings } from "./database-restore/controller.ts";
import { databaseRegistration } from "./database/controller.ts";
import { projectRegistration } from "./project/controller.ts";

// The registry: every kind the operator reconciles. A new kind is its own folder plus one line here
// (src/resources/README.md lists the files a kind consists of).

export interface KindSettings {
  restore?: RestoreSettings;
}

export function operatorKinds(settings: KindSettings = {}): KindRegistration[] {
  return [projectRegistration, databaseRegistration, restoreRegistration(settings.restore)];
}
