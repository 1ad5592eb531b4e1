import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { GenevaDriveModuleOptions } from './interfaces/geneva-drive-options.interface.js';

/**
 * `forRoot`/`forRootAsync`. The DataSource name is an extra (known when the module is declared),
 * because the engine's providers depend on that DataSource's token; the module is global by default.
 */
export const { ConfigurableModuleClass, MODULE_OPTIONS_TOKEN, OPTIONS_TYPE, ASYNC_OPTIONS_TYPE } =
  new ConfigurableModuleBuilder<GenevaDriveModuleOptions>()
    .setClassMethodName('forRoot')
    .setExtras<{ isGlobal: boolean; dataSource?: string }>({ isGlobal: true }, (definition, extras) => ({
      ...definition,
      global: extras.isGlobal,
    }))
    .build();
